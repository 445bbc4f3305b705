"""Plain data for grading apart (`gpucourse.checks.remote`): values as JSON, arrays as .npy files, never a pickle.

`encode` turns a value into JSON data (arrays saved in a `Store`, or named by a digest of their content),
`decode` rebuilds it: numbers, strings, lists, tuples, dicts, NumPy scalars and arrays (host, Numba
device, CuPy), plain dataclasses of the course, and exceptions by class name and arguments. Nothing the
notebook's run wrote can make the grader run code: arrays load with `allow_pickle=False`, classes come
from the course (or, for exceptions, builtins, numba, numpy, cupy) and are plain records.
`buffers` finds the whole buffer behind each array argument (a framed output's guard band included).
"""

from __future__ import annotations

import builtins
import contextlib
import dataclasses
import hashlib
import importlib
import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np


class ReplayMismatch(AssertionError):
    """The grader's check asked the answer something the worker's run never answered (or answered otherwise)."""


# ---------------------------------------------------------------------------------------------
# Plain data: values as JSON, arrays as .npy files (never pickles)


def array_kind(value) -> str | None:
    """"host", "device" (Numba, simulated or not) or "cupy" for an array; None for anything else (read from its type only)."""
    if isinstance(value, np.ndarray):
        return "host"
    kind = type(value)
    if kind.__module__.startswith("cupy") and kind.__name__ == "ndarray":
        return "cupy"
    if getattr(kind, "__cuda_ndarray__", False) or kind.__name__ in ("DeviceNDArray", "FakeCUDAArray"):
        return "device"
    return None


def _host(value) -> np.ndarray:
    from ..arrays import to_host

    return np.ascontiguousarray(to_host(value))


def array_digest(host: np.ndarray) -> str:
    """A digest of a host array's dtype, shape and bytes."""
    digest = hashlib.sha256(f"{host.dtype.str}{host.shape}".encode())
    digest.update(np.ascontiguousarray(host).tobytes())
    return digest.hexdigest()


class Store:
    """A transcript's folder: arrays saved as numbered .npy files."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.count = 0

    def put(self, host: np.ndarray) -> str:
        """Save a host array; its file name."""
        self.count += 1
        name = f"{self.count}.npy"
        np.save(self.folder / name, np.ascontiguousarray(host), allow_pickle=False)
        return name

    def get(self, name: str) -> np.ndarray:
        """A saved array (plain data only: a pickled object array does not load)."""
        if "/" in name or "\\" in name or not name.endswith(".npy"):
            raise ReplayMismatch(f"a transcript names an array file {name!r}")
        return np.load(self.folder / name, allow_pickle=False)


def encode(value, store: Store | None) -> Any:
    """`value` as JSON data; arrays saved in `store`, or (store None) named by their content's digest. Unknown objects are handles."""
    if value is None or type(value) in (bool, str, int, float):  # JSON's own (Python's json writes and reads floats exactly)
        return value
    if isinstance(value, complex):
        return {"complex": [value.real.hex(), value.imag.hex()]}
    if isinstance(value, np.generic) and value.dtype.kind in "biufc":
        return {"scalar": value.dtype.str, "bytes": value.tobytes().hex()}
    kind = array_kind(value)
    if kind is not None:
        host = _host(value)
        return {"array": store.put(host) if store else array_digest(host), "kind": kind}
    if isinstance(value, (list, tuple)):
        return {"list" if isinstance(value, list) else "tuple": [encode(v, store) for v in value]}
    if isinstance(value, dict):
        return {"dict": [[encode(k, store), encode(v, store)] for k, v in value.items()]}
    if isinstance(value, (set, frozenset)):
        return {"set": sorted(json.dumps(encode(v, store), sort_keys=True) for v in value)}
    if dataclasses.is_dataclass(value) and not isinstance(value, type) and type(value).__module__.startswith("gpucourse."):
        return {"dataclass": f"{type(value).__module__}:{type(value).__qualname__}",
                "fields": {f.name: encode(getattr(value, f.name), store) for f in dataclasses.fields(value) if f.init}}
    # anything else (a function, a stand-in object): a handle, named by its type; the grader never rebuilds it
    return {"handle": f"{type(value).__module__}:{type(value).__qualname__}"}


def _course_class(path: str) -> type:
    module, _, qualname = path.partition(":")
    if not module.startswith("gpucourse."):
        raise ReplayMismatch(f"a transcript names the class {path!r}, outside the course")
    found: Any = importlib.import_module(module)
    for part in qualname.split("."):
        found = getattr(found, part)
    return found


def decode(data, store: Store, answer: Callable[[str], object] | None = None, path: str = "") -> Any:
    """The value `encode` wrote (arrays as the kind they were; a handle becomes `answer(path)`, a replayed object)."""
    if data is None or type(data) in (bool, str, int, float):
        return data
    if not isinstance(data, dict) or len(data) == 0:
        raise ReplayMismatch(f"a transcript holds {str(data)[:80]}")
    if "complex" in data:
        return complex(float.fromhex(data["complex"][0]), float.fromhex(data["complex"][1]))
    if "scalar" in data:
        dtype = np.dtype(data["scalar"])
        if dtype.kind not in "biufc":
            raise ReplayMismatch(f"a transcript holds a scalar of dtype {dtype}")
        return np.frombuffer(bytes.fromhex(data["bytes"]), dtype)[0]
    if "array" in data:
        host = store.get(data["array"])
        if data["kind"] == "device":
            from ..arrays import to_device

            return to_device(host)
        if data["kind"] == "cupy":
            import cupy

            return cupy.asarray(host)
        return host
    if "list" in data or "tuple" in data:
        items = [decode(v, store, answer, f"{path}[{i}]") for i, v in enumerate(data.get("list", data.get("tuple")))]
        return items if "list" in data else tuple(items)
    if "dict" in data:
        return {decode(k, store, answer, path): decode(v, store, answer, f"{path}[{i}]") for i, (k, v) in enumerate(data["dict"])}
    if "dataclass" in data:
        cls = _course_class(data["dataclass"])
        if not dataclasses.is_dataclass(cls) or hasattr(cls, "__post_init__"):  # only plain records: building one runs no code
            raise ReplayMismatch(f"{data['dataclass']} is not a plain dataclass of the course")
        return cls(**{name: decode(v, store, answer, f"{path}.{name}") for name, v in data["fields"].items()})
    if "handle" in data:
        if answer is None:
            raise ReplayMismatch(f"a transcript holds an object ({data['handle']}) where a value was expected")
        return answer(path)
    raise ReplayMismatch(f"a transcript holds {sorted(data)!r}")


def digest(value) -> str:
    """The digest of a value's plain form (arrays by content): what matches a grader's call with a worker's."""
    return hashlib.sha256(json.dumps(encode(value, None), sort_keys=True).encode()).hexdigest()


def exception_data(error: BaseException) -> dict:
    """An exception as plain data: its class's path, its message and (when plain) its arguments."""
    data = {"type": f"{type(error).__module__}:{type(error).__qualname__}", "message": str(error)}
    if all(type(arg) in (str, int, float, bool) or arg is None for arg in error.args):
        data["args"] = list(error.args)  # KeyError('x') says 'x' with its quotes: rebuilt from its arguments, it says the same
    return data


#: Where a recorded exception's class may come from: the grader rebuilds it by name, with its message, nothing else.
_EXCEPTION_MODULES = ("builtins", "numba", "gpucourse", "cupy", "numpy")


def rebuilt_exception(data: dict) -> BaseException:
    """The exception `exception_data` wrote, of its class where that is a known one; a RuntimeError naming it otherwise."""
    module, _, qualname = data["type"].partition(":")
    message = data["message"]
    if module.split(".")[0] in _EXCEPTION_MODULES:
        with contextlib.suppress(Exception):
            found: Any = builtins if module == "builtins" else importlib.import_module(module)
            for part in qualname.split("."):
                found = getattr(found, part)
            if isinstance(found, type) and issubclass(found, BaseException) and not issubclass(found, (SystemExit, KeyboardInterrupt)):
                args = data.get("args")
                rebuilt = found(*args) if isinstance(args, list) and all(type(a) in (str, int, float, bool) or a is None for a in args) \
                    else found(message)
                if str(rebuilt) == message:
                    return rebuilt
                return found(message)
    return RuntimeError(f"{qualname}: {message}")


# ---------------------------------------------------------------------------------------------
# Where arrays live: a view handed to an answer (a framed output) is written back with its whole buffer


def _root(value):
    """The whole buffer behind an array (a view's base), as (key, read() -> host array, write(host array))."""
    kind = array_kind(value)
    if kind == "host" or kind == "cupy":
        base = value
        while getattr(base, "base", None) is not None and array_kind(base.base) == kind:
            base = base.base
        if kind == "host":
            return id(base), lambda: base.copy(), lambda host: base.__setitem__(Ellipsis, host)
        return id(base), lambda: base.get(), lambda host: base.set(host)
    inner = getattr(value, "_ary", None)
    if isinstance(inner, np.ndarray):  # the simulator's device array wraps a NumPy array
        return _root(inner)
    try:  # a Numba device array on a GPU: the whole allocation its memory belongs to, as bytes (a framed output's guard band too)
        from numba.cuda.cudadrv.devicearray import DeviceNDArray

        owner = value.gpu_data.owner
        whole = DeviceNDArray(shape=(int(owner.size),), strides=(1,), dtype=np.uint8, gpu_data=owner)
        key = int(whole.device_ctypes_pointer.value or 0)
        return key, whole.copy_to_host, lambda host: whole.copy_to_device(np.ascontiguousarray(host).view(np.uint8).ravel())
    except Exception:  # noqa: BLE001 - an array without a known allocation: the array alone
        return id(value), lambda: _host(value), lambda host: value.copy_to_device(host)


def _arrays_in(values) -> Iterator[tuple[str, object]]:
    """Every array among call arguments (and one level inside lists, tuples and dicts), with its place."""
    for place, value in values:
        if array_kind(value) is not None:
            yield place, value
        elif isinstance(value, (list, tuple)):
            for i, item in enumerate(value):
                if array_kind(item) is not None:
                    yield f"{place}[{i}]", item


def buffers(arguments) -> dict[int, tuple[str, Callable, Callable]]:
    """The buffers behind the arrays among (place, value) arguments: key -> (first place, read(), write(host array))."""
    found: dict[int, tuple[str, Callable, Callable]] = {}
    for place, array in _arrays_in(arguments):
        key, read, write = _root(array)
        found.setdefault(key, (place, read, write))
    return found
