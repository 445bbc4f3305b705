"""Kernels of the course, one module per chapter or theme."""
