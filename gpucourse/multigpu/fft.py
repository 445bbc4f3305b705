"""The distributed 3D FFT by slabs, and the periodic Poisson solve on it.

An n0 x n1 x n2 array is split along its first axis into P slabs; part p holds rows0[p] planes on
devices[p] (a device may repeat: several parts on one GPU). The forward transform goes in three
stages:

1. each part transforms its planes in 2D, over axes 1 and 2 (cuFFT through CuPy; `rfft2` for a real
   float32 input, which keeps n2 // 2 + 1 frequencies of the last axis);
2. the all-to-all (`alltoall.AllToAll`, rotated schedule): part p sends to part q the columns q owns
   along axis 1, and receives the planes of every part for its own columns: afterwards part q holds
   all n0 planes of rows1[q] columns, an array n0 x rows1[q] x n2';
3. each part transforms along axis 0, the axis it now holds whole.

The result stays in that transposed layout (part q holds X[:, its columns, :]), as FFTW's and
cuFFTMp's slab transforms leave it; the inverse runs the stages backwards. Sizes need not divide by
P (slabs differ by at most one plane); a part with nothing to hold (P > n0 or P > n1) is an error.
In the simulator the FFTs are NumPy's, on host arrays, and the decomposition and all-to-all run as on
a GPU. `fft3d_model_ms` is the model: HBM passes of the local FFTs plus the all-to-all on ONE
pair's copy rate (`alltoall.alltoall_ms`).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from .. import mode
from ..arrays import require_cupy
from ..errors import DecompositionError
from .alltoall import AllToAll, alltoall_ms
from .gpus import check_ordinal, on_device, synchronize_all


def split_sizes(n: int, parts: int, axis: str = "axis") -> list[int]:
    """Sizes of `parts` slabs of `n` planes, as even as can be (the first n % parts one larger); DecompositionError if one is empty."""
    if parts < 1:
        raise DecompositionError(f"a split needs at least one part; got {parts}")
    if parts > n:
        raise DecompositionError(f"{n} planes along {axis} do not split over {parts} parts: a part would hold nothing. "
                                 f"Use at most {n} parts, or a larger size.")
    return [n // parts + (1 if p < n % parts else 0) for p in range(parts)]


def _offsets(sizes: Sequence[int]) -> list[int]:
    return [int(v) for v in np.concatenate([[0], np.cumsum(sizes)[:-1]])]


def _xp():
    return np if mode.is_simulator() else require_cupy("the distributed FFT")


class SlabFFT:
    """A planned slab decomposition of an n0 x n1 x n2 FFT over `devices` (complex64 C2C, or float32 R2C with real=True)."""

    def __init__(self, shape: tuple[int, int, int], devices: Sequence[int], *, real: bool = False, schedule: str = "rotated",
                 issuer: str = "sender") -> None:
        if len(shape) != 3 or any(int(n) < 1 for n in shape):
            raise DecompositionError(f"the slab FFT is for 3D arrays; got shape {tuple(shape)}")
        self.shape = tuple(int(n) for n in shape)
        self.devices = [check_ordinal(d) for d in devices]
        parts = len(self.devices)
        n0, n1, n2 = self.shape
        self.real = real
        self.nz = n2 // 2 + 1 if real else n2
        self.rows0 = split_sizes(n0, parts, "axis 0 (the slabs)")
        self.rows1 = split_sizes(n1, parts, "axis 1 (the columns after the all-to-all)")
        self.off0, self.off1 = _offsets(self.rows0), _offsets(self.rows1)
        self.schedule, self.issuer = schedule, issuer
        xp = _xp()
        self.freq, self.out = [], []
        for p, device in enumerate(self.devices):
            with on_device(device):
                self.freq.append(xp.empty((self.rows0[p], n1, self.nz), np.complex64))
                self.out.append(xp.empty((n0, self.rows1[p], self.nz), np.complex64))
        forward_send, forward_recv = self._blocks(self.freq, self.out)
        self.forward_exchange = AllToAll(forward_send, forward_recv, self.devices, schedule=schedule, issuer=issuer)
        self.inverse_exchange = AllToAll(forward_recv, forward_send, self.devices, schedule=schedule, issuer=issuer)
        synchronize_all(self.devices)

    @property
    def parts(self) -> int:
        """Number of slabs."""
        return len(self.devices)

    def _blocks(self, freq: list, out: list) -> tuple[list, list]:
        """send[p][q]: part p's planes, q's columns (a 2D view, rows contiguous); recv[q][p]: where they land in q's array."""
        n0, n1 = self.shape[:2]
        parts, nz = self.parts, self.nz
        send = [[freq[p].reshape(self.rows0[p], n1 * nz)[:, self.off1[q] * nz:(self.off1[q] + self.rows1[q]) * nz] for q in range(parts)]
                for p in range(parts)]
        recv = [[out[q].reshape(n0, self.rows1[q] * nz)[self.off0[p]:self.off0[p] + self.rows0[p], :] for p in range(parts)]
                for q in range(parts)]
        return send, recv

    def scatter(self, full) -> list:
        """Part p's slab of a whole host array (rows0[p] planes), on its device."""
        xp = _xp()
        dtype = np.float32 if self.real else np.complex64
        slabs = []
        for p, device in enumerate(self.devices):
            with on_device(device):
                slabs.append(xp.asarray(np.ascontiguousarray(full[self.off0[p]:self.off0[p] + self.rows0[p]], dtype=dtype)))
        return slabs

    def gather(self, parts: Sequence) -> np.ndarray:
        """The whole transposed-layout result on the host (n0 x n1 x nz): each part's columns put in place."""
        whole = np.empty((self.shape[0], self.shape[1], self.nz), np.complex64)
        for q, part in enumerate(parts):
            whole[:, self.off1[q]:self.off1[q] + self.rows1[q]] = part if isinstance(part, np.ndarray) else part.get()
        return whole

    def forward(self, slabs: Sequence) -> list:
        """The 3D FFT of the array whose slabs are `slabs` (part p's rows0[p] planes): part q gets X[:, its columns, :]."""
        xp = _xp()
        for p, device in enumerate(self.devices):
            with on_device(device):
                transform = xp.fft.rfft2 if self.real else xp.fft.fft2
                self.freq[p][...] = transform(slabs[p], axes=(1, 2))  # stage 1: 2D FFTs of each plane
        synchronize_all(self.devices)  # the exchange's streams do not wait for the FFTs' stream
        self.forward_exchange.issue()  # stage 2: the all-to-all
        synchronize_all(self.devices)
        results = []
        for q, device in enumerate(self.devices):
            with on_device(device):
                results.append(xp.fft.fft(self.out[q], axis=0).astype(np.complex64, copy=False))  # stage 3: along axis 0
        return results

    def inverse(self, parts: Sequence) -> list:
        """The inverse of `forward`: from the transposed layout back to slabs of the (real, with real=True) array."""
        xp = _xp()
        for q, device in enumerate(self.devices):
            with on_device(device):
                self.out[q][...] = xp.fft.ifft(parts[q], axis=0)
        synchronize_all(self.devices)
        self.inverse_exchange.issue()
        synchronize_all(self.devices)
        slabs = []
        for p, device in enumerate(self.devices):
            with on_device(device):
                if self.real:
                    slabs.append(xp.fft.irfft2(self.freq[p], s=self.shape[1:], axes=(1, 2)).astype(np.float32, copy=False))
                else:
                    slabs.append(xp.fft.ifft2(self.freq[p], axes=(1, 2)).astype(np.complex64, copy=False))
        return slabs

    def wavenumbers(self, q: int, length: float = 2 * np.pi) -> tuple:
        """(k0, k1, k2) of part q's columns in the transposed layout, broadcastable to its n0 x rows1[q] x nz array (rad per unit)."""
        n0, n1, n2 = self.shape
        scale = 2 * np.pi / length
        k0 = np.fft.fftfreq(n0, 1.0 / n0) * scale
        k1 = (np.fft.fftfreq(n1, 1.0 / n1) * scale)[self.off1[q]:self.off1[q] + self.rows1[q]]
        k2 = (np.fft.rfftfreq(n2, 1.0 / n2) if self.real else np.fft.fftfreq(n2, 1.0 / n2)) * scale
        return k0[:, None, None], k1[None, :, None], k2[None, None, :]


def poisson_periodic(fft: SlabFFT, f_slabs: Sequence, length: float = 2 * np.pi) -> list:
    """u with laplacian(u) = f on the periodic cube of side `length`, mean zero: slabs in, slabs out (û = -f̂ / |k|^2)."""
    xp = _xp()
    spectra = fft.forward(f_slabs)
    for q, device in enumerate(fft.devices):
        with on_device(device):
            k0, k1, k2 = (xp.asarray(k.astype(np.float32)) for k in fft.wavenumbers(q, length))
            k2sum = k0 * k0 + k1 * k1 + k2 * k2
            spectra[q] *= xp.where(k2sum > 0, -1.0 / xp.where(k2sum > 0, k2sum, 1), 0).astype(np.float32)
    return fft.inverse(spectra)


def relative_error(result: np.ndarray, reference: np.ndarray) -> float:
    """max |result - reference| / max |reference|."""
    return float(np.max(np.abs(result - reference)) / max(np.max(np.abs(reference)), 1e-30))


def fft3d_model_ms(shape: tuple[int, int, int], parts: int, hbm_gbs: float, pair_gbs: float, *, real: bool = False,
                   passes: float = 5.0, schedule: str = "rotated") -> dict:
    """The model of one forward transform on `parts` GPUs, ms: local FFTs as `passes` reads and writes of each GPU's complex
    data at `hbm_gbs`, plus the all-to-all of its blocks at ONE pair's copy rate `pair_gbs` (lockstep model).

    `passes` counts: the 2D FFT (two), its copy into the exchange buffer, the move of axis 0 to the last
    place and the 1D FFT (one each). Returns {"fft_ms", "alltoall_ms", "total_ms", "alltoall_share"}.
    """
    n0, n1, n2 = shape
    nz = n2 // 2 + 1 if real else n2
    local_bytes = n0 * n1 * nz * 8 / parts
    fft_ms = passes * 2 * local_bytes / (hbm_gbs * 1e9) * 1e3
    block = local_bytes / parts
    exchange = alltoall_ms(parts, block, pair_gbs, schedule) if parts > 1 else 0.0
    return {"fft_ms": fft_ms, "alltoall_ms": exchange, "total_ms": fft_ms + exchange,
            "alltoall_share": exchange / (fft_ms + exchange)}


def cufftmp_status() -> tuple[bool, str]:
    """(True, version) if nvmath-python's distributed FFT (cuFFTMp, NVSHMEM) can be imported here; (False, the exact reason) otherwise."""
    if mode.is_simulator():
        return False, "cuFFTMp runs on GPUs, and this session runs in simulator mode"
    try:
        import nvmath
        import nvmath.distributed  # noqa: F401
        from nvmath.distributed import fft as _fft  # noqa: F401
    except Exception as exc:
        return False, f"nvmath.distributed cannot be imported ({type(exc).__name__}: {exc})"
    return True, f"nvmath-python {getattr(nvmath, '__version__', '?')}"
