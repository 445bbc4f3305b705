"""What the compiler made of a Numba kernel: registers, shared and local memory, PTX and SASS; CUDA C built by NVRTC.

These reports exist only for real compilations: in simulator mode nothing is compiled, and every
function here raises GPUOnlyFeature, which `gpucourse.gpu_only()` turns into one printed line
(`nvrtc_compile` alone needs no GPU: NVRTC compiles for a named architecture without one).
"""

from __future__ import annotations

import re
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

from . import mode
from .errors import EnvironmentProblem, GPUOnlyFeature


@dataclass(frozen=True)
class ResourceUsage:
    """Per-thread and per-block resources of one compiled version of a kernel."""

    signature: str
    registers: int
    shared_bytes: int
    local_bytes: int
    const_bytes: int
    max_threads_per_block: int


def _overloads(kernel, feature: str) -> list:
    if mode.is_simulator():
        raise GPUOnlyFeature(feature, "the simulator compiles nothing (it runs the Python source)")
    overloads = list(getattr(kernel, "overloads", {}).items())
    if not overloads:
        raise ValueError(f"{getattr(kernel, '__name__', kernel)!r} is not compiled yet: launch it (or call .compile(signature)) first")
    return overloads


def _signature_text(args) -> str:
    return "(" + ", ".join(str(a) for a in args) + ")"


def resource_usage(kernel) -> list[ResourceUsage]:
    """Registers, shared, local and constant memory of every compiled version of `kernel`."""
    return [
        ResourceUsage(
            signature=_signature_text(args),
            registers=compiled.regs_per_thread,
            shared_bytes=compiled.shared_mem_per_block,
            local_bytes=compiled.local_mem_per_thread,
            const_bytes=compiled.const_mem_size,
            max_threads_per_block=compiled.max_threads_per_block,
        )
        for args, compiled in _overloads(kernel, "The compiler's resource report")
    ]


def ptx(kernel, index: int = 0) -> str:
    """The PTX of compiled version `index` of `kernel` for the current device."""
    from numba import cuda

    args, compiled = _overloads(kernel, "PTX")[index]
    return compiled.inspect_asm(cuda.get_current_device().compute_capability)


def sass(kernel, index: int = 0) -> str:
    """The SASS (machine code) of compiled version `index` of `kernel`; needs nvdisasm from the CUDA toolkit."""
    args, compiled = _overloads(kernel, "SASS")[index]
    if shutil.which("nvdisasm") is None:
        raise EnvironmentProblem("SASS needs nvdisasm from the CUDA toolkit on the PATH (conda install cuda-nvdisasm).")
    return compiled.inspect_sass()


def count_matches(text: str, pattern: str) -> int:
    """How many lines of an assembly listing match the regular expression `pattern`."""
    regex = re.compile(pattern)
    return sum(1 for line in text.splitlines() if regex.search(line))


# Options the simulator's cuda.jit accepts; the others only change generated code, which it has none of.
_SIMULATOR_OPTIONS = {"device", "debug", "fastmath", "opt", "cache", "shared_memory_carveout", "inline"}


def jit_variant(kernel, **options):
    """Compile the Python source of `kernel` again with other options (e.g. max_registers=16, fastmath=True).

    In simulator mode the options that only shape machine code (such as max_registers) are dropped,
    since the simulator runs the Python source as it is.
    """
    from numba import cuda

    source = getattr(kernel, "py_func", None) or getattr(kernel, "fn", None) or kernel
    if mode.is_simulator():
        options = {key: value for key, value in options.items() if key in _SIMULATOR_OPTIONS}
    return cuda.jit(**options)(source)


#: What cupy.RawKernel and cupy.RawModule add to every NVRTC build they make (CuPy's compiler.py): float32 subnormals
#: flushed to zero, in the course's CUDA C kernels and in CuPy's own.
CUPY_NVRTC_OPTIONS = ("-ftz=true",)


def nvrtc_compile(code: str, name: str, options: tuple[str, ...], arch: str) -> bytes:
    """NVRTC's output for CUDA C `code` built with exactly `options`: PTX for arch 'compute_XY', a cubin for 'sm_XY'."""
    import importlib.util

    if not re.fullmatch(r"(compute|sm)_\d+", arch):
        raise ValueError(f"arch must be 'compute_XY' (PTX) or 'sm_XY' (a cubin), e.g. 'sm_90'; got {arch!r}")
    if importlib.util.find_spec("cupy_backends") is None:  # CuPy's wheels bring NVRTC; it compiles without a GPU too
        raise EnvironmentProblem(f"Compiling {name} with NVRTC needs CuPy: pip install cupy-cuda12x (cupy-cuda13x for a CUDA 13 "
                                 "driver), then restart the kernel.")
    from cupy_backends.cuda.libs import nvrtc

    program = nvrtc.createProgram(code, f"{name}.cu", (), ())
    try:
        nvrtc.compileProgram(program, (f"-arch={arch}", *options))
        image = nvrtc.getPTX(program) if arch.startswith("compute_") else nvrtc.getCUBIN(program)
    except nvrtc.NVRTCError as failed:
        raise RuntimeError(f"NVRTC could not compile {name} for {arch} with {list(options)}: {failed}\n"
                           f"{nvrtc.getProgramLog(program)}") from failed
    finally:
        nvrtc.destroyProgram(program)
    return image if isinstance(image, bytes) else image.encode()


def nvrtc_kernel(code: str, name: str, options: tuple[str, ...] = ()):
    """Kernel `name` of CUDA C `code` built by NVRTC with exactly `options` for the current GPU (no -ftz=true added).

    Called like a cupy.RawKernel: kernel(grid, block, args). A cubin where this NVRTC knows the GPU's architecture,
    else PTX for the newest one it knows, compiled by the driver when loaded.
    """
    from .arrays import require_cupy

    cupy = require_cupy(f"CUDA C compiled with NVRTC ({name})")
    from cupy_backends.cuda.libs import nvrtc

    capability = int(cupy.cuda.Device().compute_capability)
    known = [arch for arch in nvrtc.getSupportedArchs() if arch <= capability]
    if not known:
        raise EnvironmentProblem(f"This NVRTC compiles for none of the architectures up to compute capability {capability}: "
                                 "install the CuPy wheel for your driver's CUDA version.")
    arch = f"sm_{capability}" if capability in known else f"compute_{max(known)}"
    image = nvrtc_compile(code, name, options, arch)
    with tempfile.TemporaryDirectory() as folder:  # cupy.RawModule loads a built image from a file only
        path = Path(folder) / (name + (".cubin" if arch.startswith("sm_") else ".ptx"))
        path.write_bytes(image)
        return cupy.RawModule(path=str(path)).get_function(name)  # loaded here, while the file exists
