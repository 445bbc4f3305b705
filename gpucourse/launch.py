"""Launch once, call cheaply: kernels bound to their arguments, plans made once, launched with one driver call.

A Numba launch ``kernel[blocks, threads](f, df)`` does a lot of Python work every time: it types each
argument, looks the compiled kernel up, converts CuPy arrays (and, through the CUDA array
interface, waits for the stream that made them), and marshals every argument. That costs the host
40-60 us, longer than many kernels run. The course's launchers also check their arguments.

This module does that work once:

* `bind(kernel, blocks, threads, *args)` compiles the kernel for the arguments' types, loads it,
  resolves the launch configuration and marshals the arguments (with Numba's own code, so the
  layout is Numba's): a `BoundKernel` whose call is one `cuda.core.launch`.
* a *plan builder* is a launcher written to check its arguments and return bound kernels instead
  of launching them. `@planned` turns it into a launcher that makes a `Plan` once for each new set
  of arguments (arrays are known by address, shape, strides and dtype) and afterwards only
  launches it; `launcher.plan(...)` hands the `Plan` to the caller.
* a `Plan` launches on CuPy's current stream (the legacy default stream without CuPy), so it is
  ordered after whatever CuPy queued there, with no host synchronization. Called on another stream
  than last time, it first makes that stream wait for the last one (an event, not a host wait).

Who keeps device memory alive: launches hold arrays by address (`unowned` views), never the arrays
themselves. A plan the caller holds keeps the arrays it was made with; a plan in a launcher's cache
keeps none, and leaves the cache (with any scratch it owns) as soon as one of the arrays or objects
it was made for is garbage-collected. So deleting a notebook's arrays gives their memory back.

In the simulator a bound kernel simply launches the simulated kernel; plans and caches behave the same.
"""

from __future__ import annotations

import collections
import ctypes
import functools
import inspect
import weakref
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from . import environment, mode
from .errors import ArrayArgumentError, LaunchError, PlanMismatch
from .simulation import switching_often

#: Plans a launcher keeps (oldest first out). Each holds addresses, not arrays, and leaves with its arrays.
PLANS_PER_LAUNCHER = 32

#: While a graph is being captured, the list of plans launched into it (gpucourse.graphs fills it).
CAPTURING: list[list] = []

#: While a plan builder runs, the list of arrays it made for the plan's own use (see `owned`).
_OWNING: list[list] = []


# ---------------------------------------------------------------------------------------------
# The driver API (cuda.bindings, which Numba itself uses) on a GPU; nothing in the simulator

if mode.on_gpu():
    from cuda.bindings import driver as _DRIVER

    _SUCCESS = _DRIVER.CUresult.CUDA_SUCCESS
else:
    _DRIVER = _SUCCESS = None


def _driver_call(name: str, *args):
    """Call a CUDA driver function; raise LaunchError with its name if it fails; return its result."""
    error, *result = getattr(_DRIVER, name)(*args)
    if error != _SUCCESS:
        raise LaunchError(f"{name} failed: {error.name}")
    return result[0] if len(result) == 1 else tuple(result)


# ---------------------------------------------------------------------------------------------
# Streams


class _Streams:
    """Stream handles and their cuda.core / CuPy objects, made once per handle."""

    def __init__(self) -> None:
        self._core: dict[int, Any] = {}
        self._cupy: dict[int, Any] = {}
        self._driver: dict[int, Any] = {}
        self._cupy_module = None

    def current_handle(self) -> int:
        """The handle of CuPy's current stream on the current device (0: the legacy default stream)."""
        cupy = self._cupy_module
        if cupy is None:
            if not environment.cupy_installed():
                return 0
            import cupy

            self._cupy_module = cupy
        return cupy.cuda.get_current_stream().ptr

    def driver(self, handle: int):
        """The driver's CUstream for `handle` (cached)."""
        stream = self._driver.get(handle)
        if stream is None:
            stream = self._driver[handle] = _DRIVER.CUstream(handle)
        return stream

    def core(self, handle: int):
        """The cuda.core Stream for `handle` (cached)."""
        stream = self._core.get(handle)
        if stream is None:
            from cuda.core import Stream

            stream = self._core[handle] = Stream.from_handle(handle)
        return stream

    def cupy(self, handle: int):
        """A CuPy stream object for `handle`, for CuPy kernels and library calls in a plan (cached)."""
        import cupy

        current = cupy.cuda.get_current_stream()
        if current.ptr == handle:  # the usual case: a plan launches on CuPy's current stream
            return current
        stream = self._cupy.get(handle)
        if stream is None:
            import warnings

            with warnings.catch_warnings():  # CuPy 14 deprecates ExternalStream; it remains the way to wrap a raw handle
                warnings.simplefilter("ignore", DeprecationWarning)
                stream = self._cupy[handle] = cupy.cuda.Stream.null if handle == 0 else cupy.cuda.ExternalStream(handle)
        return stream

    def order(self, before: int, after: int) -> None:
        """Make stream `after` wait (on the device) for the work queued so far on stream `before`."""
        if mode.is_simulator() or before == after:
            return
        self.core(after).wait(self.core(before).record())


STREAMS = _Streams()


def stream_handle(stream=None) -> int:
    """The integer handle of `stream` (CuPy, Numba or cuda.core stream, or int); None: CuPy's current stream."""
    if mode.is_simulator():
        return 0
    if stream is None:
        return STREAMS.current_handle()
    for attribute in ("ptr", "handle"):
        value = getattr(stream, attribute, None)
        if value is not None:
            stream = value
            break
    value = getattr(stream, "value", stream)  # a ctypes c_void_p handle
    if hasattr(value, "__int__"):
        return int(value or 0)
    raise TypeError(f"cannot use {stream!r} as a stream: pass a CuPy, Numba or cuda.core stream, or an integer handle")


# ---------------------------------------------------------------------------------------------
# Bound kernels


def _numba_view(value):
    """A device array argument as a Numba device array (a view, no copy, no synchronization); others unchanged."""
    if isinstance(value, np.ndarray):
        raise ArrayArgumentError(
            f"a NumPy array of shape {value.shape} was passed where the kernel reads device memory; copy it to the device "
            "first (gpucourse.to_device(a) or cupy.asarray(a)). Numba would copy it at every launch, and back."
        )
    if hasattr(value, "__cuda_array_interface__") and not hasattr(value, "copy_to_host"):
        from numba import cuda

        # sync=False: ordering is the plan's business (it launches on the stream CuPy queues on)
        return cuda.as_cuda_array(value, sync=False)
    return value


def _span(array) -> tuple[int, int]:
    """The bytes an array spans around its first element: (lowest offset, highest offset + 1); strides may be negative."""
    low = sum((n - 1) * s for n, s in zip(array.shape, array.strides) if s < 0)
    high = sum((n - 1) * s for n, s in zip(array.shape, array.strides) if s > 0) + array.itemsize
    return low, high


def _unowned_host(value: np.ndarray) -> np.ndarray:
    """A NumPy view of `value`'s memory that does not keep it alive."""
    if value.size == 0:
        return np.empty(value.shape, value.dtype)
    low, high = _span(value)
    memory = (ctypes.c_char * (high - low)).from_address(value.__array_interface__["data"][0] + low)
    return np.ndarray(value.shape, value.dtype, buffer=memory, offset=-low, strides=value.strides)


def unowned(value):
    """A view of device array `value` that does not keep its memory alive; any other value unchanged.

    Launches hold these, so that a plan in a launcher's cache holds no array: whoever made the
    arrays decides how long they live (a plan the caller holds keeps its own arrays). On a GPU the
    view is a CuPy array over the same memory with no owner. In the simulator a NumPy array (what
    CuPy code runs on there) becomes a NumPy view with no owner, and a simulated device array
    another simulated one over such a view.
    """
    if mode.is_simulator():
        if type(value).__name__ == "FakeCUDAArray":
            return type(value)(_unowned_host(value._ary), value.stream)
        return _unowned_host(value) if isinstance(value, np.ndarray) else value
    if not hasattr(value, "__cuda_array_interface__"):
        return value
    import cupy

    array = value if isinstance(value, cupy.ndarray) else cupy.asarray(value)
    if array.size == 0:
        return cupy.ndarray(array.shape, array.dtype)
    low, high = _span(array)
    memory = cupy.cuda.UnownedMemory(array.data.ptr + low, high - low, None, array.device.id)
    return cupy.ndarray(array.shape, array.dtype, cupy.cuda.MemoryPointer(memory, -low), array.strides)


def _dims(value) -> tuple[int, int, int]:
    dims = (int(value),) if isinstance(value, (int, np.integer)) else tuple(int(v) for v in value)
    return dims + (1,) * (3 - len(dims))


def _parameter_block(marshalled: Sequence) -> tuple[list, object]:
    """Numba's marshalled kernel arguments as ctypes values and the array of pointers cuLaunchKernel reads."""
    values = []
    for value in marshalled:
        if isinstance(value, bool):
            values.append(ctypes.c_bool(value))
        elif isinstance(value, int):  # addresses, sizes, shapes and strides: pointer-sized integers
            values.append(ctypes.c_ssize_t(value))
        else:  # ctypes scalars made by Numba (c_float, c_double, c_int32, ...)
            values.append(value)
    pointers = (ctypes.c_void_p * max(1, len(values)))(*[ctypes.addressof(v) for v in values])
    return values, pointers


class BoundKernel:
    """One compiled kernel with its launch configuration and marshalled arguments: a call only launches."""

    __slots__ = ("kernel", "name", "blocks", "threads", "shared_bytes", "_function", "_values", "_pointers", "_address", "_simulated")

    def __init__(self, kernel, blocks, threads, args: Sequence, shared_bytes: int = 0) -> None:
        self.kernel = kernel  # the Numba kernel (dispatcher): its compiler reports, or a raw launch to compare with
        self.name = getattr(kernel, "__name__", None) or getattr(getattr(kernel, "py_func", None), "__name__", "kernel")
        self.blocks, self.threads, self.shared_bytes = _dims(blocks), _dims(threads), int(shared_bytes)
        if mode.is_simulator():  # configured at each launch: the simulator's configuration lives on the kernel object
            self._simulated = (kernel, tuple(unowned(a) for a in args))
            return
        self._simulated = None
        views = [_numba_view(a) for a in args]
        argtypes = tuple(kernel.typeof_pyval(v) for v in views)
        compiled = kernel.compile(argtypes)
        # Load the module now: a module load during a graph capture would end the capture.
        library_kernel = compiled._codelibrary.get_cufunc().kernel
        self._function = _driver_call("cuKernelGetFunction", library_kernel.handle)
        marshalled: list = []
        written_back: list = []
        for argtype, view in zip(compiled.argument_types, views):  # Numba's own marshalling: its argument layout
            compiled._prepare_args(argtype, view, 0, written_back, marshalled)
        if written_back:  # pragma: no cover - _numba_view refuses host arrays before this
            raise ArrayArgumentError("a bound kernel's arguments must all live on the device")
        self._values, self._pointers = _parameter_block(marshalled)
        self._address = ctypes.addressof(self._pointers)

    def launch(self, handle: int = 0) -> None:
        """Queue the kernel on the stream with integer handle `handle` (ignored in the simulator)."""
        simulated = self._simulated
        if simulated is not None:
            kernel, args = simulated
            with switching_often():
                kernel[self.blocks, self.threads, 0, self.shared_bytes](*args)
            return
        (gx, gy, gz), (bx, by, bz) = self.blocks, self.threads
        (error,) = _DRIVER.cuLaunchKernel(self._function, gx, gy, gz, bx, by, bz, self.shared_bytes, STREAMS.driver(handle),
                                          self._address, 0)
        if error != _SUCCESS:
            raise LaunchError(f"launching {self.name} with blocks={self.blocks}, threads={self.threads} failed: {error.name}")

    @property
    def max_threads_per_block(self) -> int | None:
        """The most threads per block the driver can launch this compiled kernel with (its registers decide); None in the simulator."""
        if self._simulated is not None:
            return None
        attribute = _DRIVER.CUfunction_attribute.CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK
        return int(_driver_call("cuFuncGetAttribute", attribute, self._function))

    def __repr__(self) -> str:
        return f"BoundKernel({self.name}, blocks={self.blocks}, threads={self.threads})"


class CuPyLaunch:
    """A CuPy RawKernel with its grid, block and arguments (arrays held by address), launched on a plan's stream."""

    __slots__ = ("name", "blocks", "threads", "_kernel", "_args")

    def __init__(self, kernel, blocks, threads, args: Sequence) -> None:
        self.name = getattr(kernel, "name", "raw kernel")
        self.blocks, self.threads = _dims(blocks), _dims(threads)
        self._kernel = kernel
        self._args = tuple(unowned(a) for a in args)

    def launch(self, handle: int = 0) -> None:
        """Queue the kernel on the stream with integer handle `handle`."""
        self._kernel(self.blocks, self.threads, self._args, stream=STREAMS.cupy(handle))


class LibraryLaunch:
    """A library call (a cuFFT transform, say) queued on a plan's stream: subclasses define `name` and `launch(handle)`.

    A plan builder may return these beside bound kernels; the plan launches them in order on one
    stream, and a graph captures them like kernels. Like every launch, a library call holds the
    arrays it works on through `unowned` views, never the arrays themselves.
    """

    __slots__ = ()
    name = "library call"

    def launch(self, handle: int = 0) -> None:  # pragma: no cover - abstract
        """Queue the call on the stream with integer handle `handle`."""
        raise NotImplementedError


def bind(kernel, blocks, threads, *args, shared_bytes: int = 0) -> BoundKernel:
    """Compile `kernel` for `args`, resolve its launch configuration and marshal the arguments, once."""
    return BoundKernel(kernel, blocks, threads, args, shared_bytes)


# ---------------------------------------------------------------------------------------------
# Plans


def _host_address(array: np.ndarray) -> int:
    return array.__array_interface__["data"][0]


#: Array types seen so far, and how to read each one's device address (None: by identity, in host memory). In
#: the simulator NumPy arrays stand for device arrays (CuPy code runs on them there): by address, as on a GPU.
_ARRAY_TYPES: dict[type, Callable | None] = {np.ndarray: _host_address if mode.is_simulator() else None}
_NOT_ARRAYS: set[type] = {int, float, bool, str, tuple, list, type(None), np.float32, np.float64, np.int32, np.int64}
#: Plain values: a key holds them as they are.
_VALUES = frozenset(_NOT_ARRAYS - {tuple, list})


def _address_reader(kind: type) -> Callable | None:
    if mode.is_simulator():
        if kind.__name__ == "FakeCUDAArray":  # by the address of its NumPy memory, as a GPU array by its device address
            return lambda a: _host_address(a._ary)
        return None
    if kind.__module__.startswith("cupy"):
        return lambda a: a.data.ptr
    if hasattr(kind, "device_ctypes_pointer"):  # Numba device arrays
        return lambda a: a.device_ctypes_pointer.value
    return lambda a: a.__cuda_array_interface__["data"][0]


def _is_array(value) -> bool:
    kind = type(value)
    if kind in _ARRAY_TYPES:
        return True
    if kind in _NOT_ARRAYS:
        return False
    if hasattr(value, "__cuda_array_interface__") or kind.__name__ == "FakeCUDAArray":
        _ARRAY_TYPES[kind] = _address_reader(kind)
        return True
    return False


def array_spec(value) -> tuple:
    """What a plan depends on in an array: its kind, shape, strides and dtype."""
    return (type(value), tuple(value.shape), tuple(value.strides), np.dtype(value.dtype))


def describe_spec(spec: tuple) -> str:
    """An array spec in words: 'a float32 array of shape (256, 256), C-contiguous (cupy.ndarray)'."""
    kind, shape, strides, dtype = spec
    contiguous = strides == tuple(int(s) for s in np.empty(shape, dtype=dtype).strides) if shape else True
    layout = "C-contiguous" if contiguous else f"strides {strides}"
    return f"a {dtype.name} array of shape {shape}, {layout} ({kind.__module__.split('.')[0]}.{kind.__name__})"


#: Types whose hash is their identity (objects that are not values), found as they come.
_BY_IDENTITY: dict[type, bool] = {}


def _by_identity(kind: type) -> bool:
    found = _BY_IDENTITY.get(kind)
    if found is None:
        found = _BY_IDENTITY[kind] = kind.__hash__ is None or (kind.__hash__ is object.__hash__ and not issubclass(kind, type))
    return found


def _key(value, watch: list | None = None) -> Any:
    """A hashable key: arrays by where they are and how they are laid out; objects by identity; values by value and type.

    With `watch`, the arrays and objects the key names by address or identity are appended to it:
    a cached plan must leave the cache when one of them is garbage-collected (see PlannedLauncher).
    """
    kind = type(value)
    if kind in _VALUES:
        return (kind, value)
    if _is_array(value):
        if watch is not None:
            watch.append(value)
        reader = _ARRAY_TYPES[kind]
        if reader is None:  # host arrays: by identity (watched, so the id stays theirs while a plan uses it)
            return ("array", id(value), kind, value.shape, value.dtype)
        return ("array", reader(value), kind, value.shape, value.strides, value.dtype)
    if isinstance(value, (tuple, list)):
        return (kind, *(_key(v, watch) for v in value))
    if _by_identity(kind):  # a texture reader, a kernel, a function: by identity, watched
        if watch is not None:
            watch.append(value)
        return ("object", id(value), kind)
    return (kind, value)


def _lifetime_owner(value):
    """The object whose collection ends the memory (or object) a plan depends on, shared by every view of that memory.

    A NumPy or CuPy view: its base. A Numba device array or view: the allocation its pointer
    belongs to (Numba frees the memory when that goes), or the foreign array it wraps. A simulated
    device array: its NumPy memory. Anything else: `value` itself.
    """
    if isinstance(value, np.ndarray) or type(value).__module__.startswith("cupy"):
        return value if value.base is None else value.base
    if type(value).__name__ == "FakeCUDAArray":
        return _lifetime_owner(value._ary)
    owner = getattr(getattr(value, "gpu_data", None), "owner", None)
    if owner is None or owner is value:
        return value
    return _lifetime_owner(owner)


def _weak_or_kept(callback: Callable, owner, value):
    """A weak reference calling `callback` to `owner`, else to `value` (the array it came from); `value` itself if neither can be watched.

    An array kept so stays alive with the plan, and its id stays its own while the plan uses it.
    """
    for candidate in (owner, value):
        try:
            return weakref.ref(candidate, callback)
        except TypeError:
            continue
    return value


class Plan:
    """Kernels checked, compiled and bound once for fixed arrays and options: calling the plan only launches them.

    `plan()` launches on the arrays the plan was made with. `plan(x, y, ...)` launches on other
    arrays of the same shapes, dtypes and layouts (in the order of the array arguments the plan
    was made with); arrays of another shape or dtype raise `PlanMismatch`.
    """

    def __init__(self, builder: Callable, args: tuple, kwargs: dict, keep_arrays: bool = True) -> None:
        self.name = builder.__name__
        launches, self._owned = _run_builder(builder, args, kwargs)
        self.launches = tuple(launches)
        self._array_positions = [i for i, a in enumerate(args) if _is_array(a)]
        self._specs = [array_spec(args[i]) for i in self._array_positions]
        # A plan the caller holds keeps its arrays and arguments alive (plan() launches on them, and
        # plan(x, y) rebuilds with them); a plan in a launcher's cache keeps neither: its launches
        # hold addresses, and the launcher drops it when one of its arrays is collected.
        self._kept = tuple(args[i] for i in self._array_positions) if keep_arrays else ()
        self._builder, self._kwargs = (builder, kwargs) if keep_arrays else (None, None)
        self._args = tuple(None if i in self._array_positions else a for i, a in enumerate(args)) if keep_arrays else None
        self._watching: tuple = ()  # a cached plan's weak references to what it was made for (PlannedLauncher)
        self._bindings: collections.OrderedDict = collections.OrderedDict()
        self._bindings[tuple(_key(args[i]) for i in self._array_positions)] = (self.launches, self._owned)
        self._last_stream = stream_handle()  # the arrays are ready on the stream current when the plan is made

    @property
    def kernel_names(self) -> tuple[str, ...]:
        """Names of the kernels the plan launches, in order."""
        return tuple(launch.name for launch in self.launches)

    def _rebind(self, arrays: tuple) -> tuple:
        if self._builder is None:  # pragma: no cover - cached plans are launched by their launcher only
            raise PlanMismatch(f"plan {self.name!r} belongs to its launcher's cache; make one with launcher.plan(...) to pass arrays")
        if len(arrays) != len(self._specs):
            raise PlanMismatch(f"plan {self.name!r} was made with {len(self._specs)} array argument(s); got {len(arrays)}.")
        for number, (array, spec) in enumerate(zip(arrays, self._specs)):
            if not _is_array(array):
                raise PlanMismatch(f"array argument {number} of plan {self.name!r} must be an array; got {type(array).__name__}.")
            given = array_spec(array)
            if given != spec:
                raise PlanMismatch(
                    f"plan {self.name!r} was made for {describe_spec(spec)} as array argument {number}; got "
                    f"{describe_spec(given)}. A plan is made for one shape, dtype and layout: make another plan for these "
                    "arrays, or call the plain launcher, which keeps one plan for each."
                )
        args = list(self._args)
        for position, array in zip(self._array_positions, arrays):
            args[position] = array
        launches, made = _run_builder(self._builder, tuple(args), self._kwargs)
        return tuple(launches), made

    def __call__(self, *arrays, stream=None) -> None:
        """Launch every kernel of the plan, on `arrays` if given (same specs), on `stream` (default: CuPy's current one)."""
        launches = self.launches
        if arrays:
            key = tuple(_key(a) for a in arrays)
            binding = self._bindings.get(key)
            if binding is None:
                binding = self._bindings[key] = self._rebind(arrays)
                if len(self._bindings) > 8:
                    self._bindings.popitem(last=False)
            launches = binding[0]
        handle = stream_handle(stream)
        if CAPTURING:  # in a graph: the graph's own launch orders it (see gpucourse.graphs)
            CAPTURING[-1].append(self)
        elif handle != self._last_stream:
            self.wait_on(handle)
        for launch in launches:
            launch.launch(handle)

    def wait_on(self, handle: int) -> None:
        """Before launching on stream `handle`, make it wait for this plan's last launch (on another stream)."""
        STREAMS.order(self._last_stream, handle)
        self._last_stream = handle

    def __repr__(self) -> str:
        return f"Plan({self.name}: {', '.join(self.kernel_names)})"


def _run_builder(builder: Callable, args: tuple, kwargs: dict) -> tuple[list, tuple]:
    """Run a plan builder: the launches it returns and the arrays it made for the plan (`owned`)."""
    _OWNING.append([])
    try:
        launches = _launches_of(builder(*args, **kwargs))
    finally:
        made = tuple(_OWNING.pop())
    return launches, made


def owned(*arrays):
    """Mark arrays a plan builder allocates (scratch space) as the plan's: the plan keeps them alive."""
    if _OWNING:
        _OWNING[-1].extend(arrays)
    return arrays


def _launches_of(built) -> list:
    """The bound launches a builder returned: one, a sequence, or a plan (flattened)."""
    if isinstance(built, Plan):
        return list(built.launches)
    if isinstance(built, (BoundKernel, CuPyLaunch, LibraryLaunch)):
        return [built]
    if isinstance(built, (tuple, list)):
        return [launch for item in built for launch in _launches_of(item)]
    raise TypeError(f"a plan builder must return bound kernels or a plan; got {type(built).__name__}")


class PlannedLauncher:
    """A launcher made from a plan builder: checks and binds once per argument set, then each call only launches."""

    def __init__(self, builder: Callable, maxsize: int = PLANS_PER_LAUNCHER) -> None:
        functools.update_wrapper(self, builder)
        self.builder = builder
        self.maxsize = maxsize
        self._plans: collections.OrderedDict = collections.OrderedDict()
        self._signature = inspect.signature(builder)

    def plan(self, *args, **kwargs) -> Plan:
        """Check the arguments, compile and bind: a Plan whose call only launches."""
        return Plan(self.builder, args, kwargs)

    def __call__(self, *args, stream=None, **kwargs) -> None:
        """Launch, making the plan first if these arguments have not been seen."""
        key = (_key(args), _key(tuple(sorted(kwargs.items()))) if kwargs else None)
        plans = self._plans
        plan = plans.get(key)
        if plan is None:
            plan = Plan(self.builder, args, kwargs, keep_arrays=False)
            watched: list = []
            _key((args, tuple(kwargs.values())), watched)
            plan._watching = self._watch(key, watched)
            plans[key] = plan
            if len(plans) > self.maxsize:
                plans.popitem(last=False)
        plan(stream=stream)

    def _watch(self, key, objects: list) -> tuple:
        """Weak references that drop the plan under `key` when the memory (or object) of one of `objects` is collected."""
        plans = self._plans

        def forget(reference) -> None:  # called by the garbage collector: the plan's arrays are gone
            entry = plans.get(key)
            if entry is not None and any(r is reference for r in entry._watching):
                del plans[key]

        references, seen = [], set()
        for value in objects:
            owner = _lifetime_owner(value)
            if id(owner) in seen:
                continue
            seen.add(id(owner))
            references.append(_weak_or_kept(forget, owner, value))
        return tuple(references)

    def clear(self) -> None:
        """Forget every plan (they hold addresses, compiled kernels and their own scratch, never the caller's arrays)."""
        self._plans.clear()

    @property
    def plans_made(self) -> int:
        """Plans this launcher holds now."""
        return len(self._plans)

    def __repr__(self) -> str:
        return f"<planned launcher {self.builder.__module__}.{self.builder.__name__}{self._signature}>"

    def __get__(self, obj, objtype=None):  # behave like a function when stored on a class
        return self if obj is None else functools.partial(self, obj)


def planned(builder: Callable) -> PlannedLauncher:
    """Decorate a plan builder (checks, then returns bound kernels) to make a launcher with a plan cache."""
    return PlannedLauncher(builder)


def build(launcher, *args, **kwargs) -> list:
    """The bound launches a planned launcher (or a builder) makes for these arguments, for composing plans."""
    builder = launcher.builder if isinstance(launcher, PlannedLauncher) else launcher
    return _launches_of(builder(*args, **kwargs))
