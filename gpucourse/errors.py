"""Exceptions the course raises: each message says what to change."""

from __future__ import annotations


class CourseError(Exception):
    """Base class of every error the course raises on purpose."""


class EnvironmentProblem(CourseError, RuntimeError):
    """The Python environment or the machine cannot run the course as asked."""


class GPUOnlyFeature(CourseError, RuntimeError):
    """A feature that needs a real GPU (CuPy, a compiler report, a profiler) was used in simulator mode."""

    def __init__(self, feature: str, reason: str = "this session runs in simulator mode (no usable GPU)"):
        self.feature = feature
        super().__init__(
            f"{feature} needs a CUDA GPU, and {reason}. "
            "On a GPU machine this runs as shown; here it is skipped."
        )


class LaunchConfigError(CourseError, ValueError):
    """A kernel launch configuration the device cannot run."""


class ArrayArgumentError(CourseError, TypeError):
    """An array argument of the wrong kind, dtype, shape or memory space."""


class TimingError(CourseError, RuntimeError):
    """A benchmark could not be measured as asked."""



class CaptureError(CourseError, RuntimeError):
    """Something a CUDA graph cannot hold (a synchronization, an allocation, a compilation) happened during its capture."""


class PlanMismatch(ArrayArgumentError):
    """Arrays handed to a plan that was made for another shape, dtype or layout."""


class LaunchError(CourseError, RuntimeError):
    """The CUDA driver refused a kernel launch (the message names the kernel and the driver's error)."""


class DeviceOrdinalError(CourseError, IndexError):
    """A device number that this process cannot see (the message lists the ones it can)."""


class PeerAccessError(CourseError, RuntimeError):
    """Peer access asked of two GPUs that cannot reach each other's memory directly."""


class DecompositionError(CourseError, ValueError):
    """An array that does not split evenly over the devices or ranks asked for."""


class MPIProblem(EnvironmentProblem):
    """MPI cannot run as asked: no launcher, no mpi4py, or a program that failed (the message says which)."""


class DeviceBufferError(ArrayArgumentError):
    """A device array handed to an MPI library that can only read host memory."""
