"""First look at the lent GPU: versions, driver attributes, launch overhead, and a gated timing loop."""
import ctypes
import os
import platform
import subprocess
import sys
import time

print("python", platform.python_version())
print(subprocess.run(["nvidia-smi", "--query-gpu=name,driver_version,memory.total,clocks.max.memory,ecc.mode.current,compute_mode,persistence_mode", "--format=csv"], capture_output=True, text=True).stdout)

lib = ctypes.CDLL("libcuda.so.1")
print("cuInit", lib.cuInit(0))
v = ctypes.c_int(); lib.cuDriverGetVersion(ctypes.byref(v)); print("driver CUDA version", v.value)
n = ctypes.c_int(); lib.cuDeviceGetCount(ctypes.byref(n)); print("devices", n.value)
dev = ctypes.c_int(); lib.cuDeviceGet(ctypes.byref(dev), 0)
name = ctypes.create_string_buffer(256); lib.cuDeviceGetName(name, 256, dev); print("name", name.value)
for attr, code in [("MEMORY_CLOCK_RATE_kHz", 36), ("GLOBAL_MEMORY_BUS_WIDTH", 37), ("L2_CACHE_SIZE", 38), ("CLOCK_RATE_kHz", 13), ("MULTIPROCESSOR_COUNT", 16), ("ECC_ENABLED", 32), ("CC_MAJOR", 75), ("CC_MINOR", 76), ("MAX_THREADS_PER_BLOCK", 1), ("MAX_SHARED_PER_BLOCK_OPTIN", 97), ("MAX_REGS_PER_SM", 82), ("SINGLE_TO_DOUBLE_PERF_RATIO", 87), ("COMPUTE_MODE", 20)]:
    out = ctypes.c_int(); rc = lib.cuDeviceGetAttribute(ctypes.byref(out), code, dev); print(attr, rc, out.value)

import numpy as np
print("numpy", np.__version__)
import numba
from numba import cuda
import numba_cuda
print("numba", numba.__version__, "numba-cuda", numba_cuda.__version__)
print("runtime version", cuda.runtime.get_version())
try:
    from numba.cuda.cudadrv import nvvm
    print("nvvm version", nvvm.NVVM().get_version(), "ir", nvvm.NVVM().get_ir_version())
except Exception as e:
    print("nvvm", type(e).__name__, e)
d = cuda.get_current_device()
print("numba device", d.name, d.compute_capability, d.MULTIPROCESSOR_COUNT, d.MEMORY_CLOCK_RATE, d.GLOBAL_MEMORY_BUS_WIDTH)
import cupy as cp
print("cupy", cp.__version__, "runtime", cp.cuda.runtime.runtimeGetVersion(), "driver", cp.cuda.runtime.driverGetVersion())
props = cp.cuda.runtime.getDeviceProperties(0)
print(sorted(props.keys()))

@cuda.jit
def copy1(out, inp):
    i = cuda.grid(1)
    if i < inp.size:
        out[i] = inp[i]

N = 256 ** 3
a = cuda.to_device(np.random.rand(N).astype(np.float32)); b = cuda.device_array_like(a)
copy1[N // 256, 256](b, a); cuda.synchronize()
assert np.array_equal(b.copy_to_host(), a.copy_to_host())
print("regs copy1", copy1.get_regs_per_thread() if hasattr(copy1, "get_regs_per_thread") else "n/a")
try:
    sig = list(copy1.overloads.keys())[0]
    print("regs(sig)", copy1.get_regs_per_thread(sig))
    sass = copy1.inspect_sass(sig); print("sass ok", len(sass))
except Exception as e:
    print("inspect", type(e).__name__, str(e)[:300])

# host launch cost
t = time.perf_counter()
for _ in range(200):
    copy1[N // 256, 256](b, a)
t1 = time.perf_counter(); cuda.synchronize(); t2 = time.perf_counter()
print(f"200 launches: host enqueue {1e6*(t1-t)/200:.1f} us/launch, total {1e6*(t2-t)/200:.1f} us/launch")

gate_src = r'''
extern "C" __global__ void gate_wait(const volatile int* flag, int* status, unsigned long long timeout_ns) {
    unsigned long long start, now;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(start));
    while (*flag == 0) {
        __nanosleep(1000);
        asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now));
        if (now - start > timeout_ns) { *status = 1; return; }
    }
    *status = 0;
}
'''
gate = cp.RawKernel(gate_src, "gate_wait")
flag_mem = cp.cuda.alloc_pinned_memory(4)
flag = np.frombuffer(flag_mem, dtype=np.int32, count=1)
status = cp.zeros(1, dtype=np.int32)
def gated(fn, number):
    flag[0] = 0
    gate((1,), (1,), (flag_mem.ptr, status, np.uint64(2_000_000_000)))
    s = cp.cuda.Event(); e = cp.cuda.Event()
    s.record()
    for _ in range(number):
        fn()
    e.record()
    flag[0] = 1
    e.synchronize()
    return cp.cuda.get_elapsed_time(s, e) / number, int(status.get()[0])

fn = lambda: copy1[N // 256, 256](b, a)
for k in range(3):
    print("gated per-launch ms, status:", gated(fn, 50))
s = cp.cuda.Event(); e = cp.cuda.Event()
s.record(); fn(); e.record(); e.synchronize(); print("single ungated ms", cp.cuda.get_elapsed_time(s, e))
s.record()
for _ in range(50): fn()
e.record(); e.synchronize(); print("50 ungated ms/launch", cp.cuda.get_elapsed_time(s, e) / 50)
ca = cp.asarray(a); cb = cp.empty_like(ca)
print("cupy copy gated", gated(lambda: cb.__setitem__(slice(None), ca), 50))
big = cp.random.rand(1 << 28, dtype=cp.float32); big2 = cp.empty_like(big)
ms, st = gated(lambda: big2.__setitem__(slice(None), big), 20)
print("cupy copy 1 GiB: ms", ms, "GB/s", 2 * big.nbytes / ms / 1e6)
ms, st = gated(lambda: cp.cuda.runtime.memcpyAsync(big2.data.ptr, big.data.ptr, big.nbytes, 3, 0), 20)
print("memcpy D2D 1 GiB: ms", ms, "GB/s", 2 * big.nbytes / ms / 1e6)
nb = cuda.as_cuda_array(big); nb2 = cuda.as_cuda_array(big2)
for tpb in (32, 128, 256, 512, 1024):
    ms, st = gated(lambda: copy1[(nb.size + tpb - 1) // tpb, tpb](nb2, nb), 20)
    print("numba copy tpb", tpb, "GB/s", 2 * big.nbytes / ms / 1e6, st)
cv = big.view(cp.complex128); cv2 = big2.view(cp.complex128)
ncv = cuda.as_cuda_array(cv); ncv2 = cuda.as_cuda_array(cv2)
ms, st = gated(lambda: copy1[(ncv.size + 255) // 256, 256](ncv2, ncv), 20)
print("numba complex128 copy GB/s", 2 * big.nbytes / ms / 1e6, st)
# a function that synchronizes inside: the gate must time out and say so, not hang
t = time.perf_counter()
flag[0] = 0
gate((1,), (1,), (flag_mem.ptr, status, np.uint64(300_000_000)))
cuda.synchronize()
print("sync inside gate -> waited", time.perf_counter() - t, "status", int(status.get()[0]))
print("ncu", subprocess.run("which ncu compute-sanitizer nvdisasm cuobjdump nvcc", shell=True, capture_output=True, text=True).stdout)
