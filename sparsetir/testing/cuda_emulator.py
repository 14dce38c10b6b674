"""Check TVM-generated CUDA kernels on a CPU: run every (block, thread) in turn, compiled with g++.

This checks indexing and arithmetic of kernels whose threads do not cooperate: no shared memory,
no barriers, no warp-level operations.  Kernels that use those are refused with
:class:`EmulationNotValid`, since running threads one after another cannot model them.  Atomics
are plain read-modify-writes (no concurrency here).

Entry points:

* :func:`emulate_kernel` runs one kernel of a CUDA source on numpy arrays, in place.
* :func:`launch_dims` gives each kernel's (grid, block) for given values of the size variables,
  read from the launch that TVM's host code performs.
* :func:`emulate_module` runs a scheduled module end to end: it binds arrays to the PrimFunc's
  parameters, infers the sizes from their shapes, and emulates every kernel launch in host order.

By default a kernel runs in a child process on guarded buffers, so a crash is reported as an
:class:`EmulationError` and writes past a buffer's ends are detected.
"""

from __future__ import annotations

import ctypes
import hashlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import tvm
import tvm.tirx  # noqa: F401 - registers the tirx namespace used below
import tvm_ffi
from tvm.sym import Analyzer

from sparsetir.backend.cuda_stub import cache_root
from sparsetir.backend.shared_library import compile_shared_library


class EmulationError(RuntimeError):
    """The emulated kernel crashed, timed out, or wrote outside its buffers."""


class EmulationNotValid(ValueError):
    """The kernel relies on cooperation between threads, which sequential emulation cannot model."""


# --------------------------------------------------------------------------- kernel text

_UNSUPPORTED = [
    (r"\b__shared__\b", "__shared__ memory"),
    (r"\b__syncthreads\w*\b", "__syncthreads barriers"),
    (r"\b__syncwarp\b", "__syncwarp"),
    (r"\b__shfl\w*\b", "warp shuffles (__shfl*)"),
    (r"\b__(ballot|any|all|activemask|match_\w+|reduce_\w+)(_sync)?\b", "warp vote/match/reduce intrinsics"),
    (r"\b(asm|__asm__)\b", "inline PTX assembly"),
    (r"\b(wmma|nvcuda|cooperative_groups|cuda::pipeline|__pipeline_\w+)\b", "tensor-core/cooperative/pipeline APIs"),
    (r"\btvm_warp_\w+\b", "TVM warp intrinsics"),
    (r"\b__grid_constant__\b|\bCUtensorMap\b", "TMA tensor maps"),
    (r"\b__nv_fp8\w*\b", "fp8 types"),
]

_KERNEL_DEF = r'extern\s+"C"\s+__global__\s+void\s+(?:__launch_bounds__\s*\([^)]*\)\s*)?{name}\s*\(([^)]*)\)\s*\{{'

# C type (without qualifiers) -> numpy dtype of one element / one component.
_SCALAR_DTYPES = {
    "float": "float32", "double": "float64", "half": "float16", "__half": "float16",
    "int": "int32", "signed int": "int32", "int32_t": "int32",
    "unsigned int": "uint32", "uint": "uint32", "uint32_t": "uint32", "unsigned": "uint32",
    "long long": "int64", "long long int": "int64", "int64_t": "int64", "long": "int64",
    "unsigned long long": "uint64", "uint64_t": "uint64", "unsigned long": "uint64",
    "short": "int16", "int16_t": "int16", "unsigned short": "uint16", "ushort": "uint16", "uint16_t": "uint16",
    "char": "int8", "signed char": "int8", "int8_t": "int8",
    "unsigned char": "uint8", "uchar": "uint8", "uint8_t": "uint8", "bool": "bool",
    "nv_bfloat16": "bfloat16", "__nv_bfloat16": "bfloat16",
}
_VECTOR_BASES = {
    "char": "int8", "uchar": "uint8", "short": "int16", "ushort": "uint16", "int": "int32",
    "uint": "uint32", "float": "float32", "double": "float64", "longlong": "int64",
    "ulonglong": "uint64", "half": "float16",
}


@dataclass(frozen=True)
class KernelParam:
    """One kernel parameter: C type text (no name), name, pointer or not, numpy element dtype."""

    ctype: str
    name: str
    is_pointer: bool
    dtype: str


def _element_dtype(base: str, kernel: str) -> str:
    if base in _SCALAR_DTYPES:
        return _SCALAR_DTYPES[base]
    match = re.fullmatch(r"([a-z]+)([1-4])", base)
    if match and match.group(1) in _VECTOR_BASES:
        return _VECTOR_BASES[match.group(1)]
    raise EmulationNotValid(f"kernel {kernel}: parameter type {base!r} is not supported by the emulator")


def _parse_params(text: str, kernel: str) -> list[KernelParam]:
    params = []
    for raw in filter(None, (p.strip() for p in text.split(","))):
        match = re.fullmatch(r"(.*?)([A-Za-z_]\w*)", raw, flags=re.S)
        if not match:
            raise EmulationNotValid(f"kernel {kernel}: cannot parse parameter {raw!r}")
        ctype = re.sub(r"\b(__restrict__|__restrict|__grid_constant__)\b", "", match.group(1))
        ctype = " ".join(ctype.replace("*", " * ").split()).replace(" *", "*")
        base = " ".join(w for w in ctype.replace("*", " ").split() if w not in ("const", "volatile"))
        params.append(KernelParam(ctype, match.group(2), "*" in ctype, _element_dtype(base, kernel)))
    return params


def _kernel_definition(cuda_source: str, kernel_name: str) -> tuple[str, list[KernelParam]]:
    """The full text of ``kernel_name``'s definition and its parsed parameters."""
    start = cuda_source.find('extern "C" __global__')
    if start < 0:
        raise ValueError('no `extern "C" __global__` kernel in the CUDA source')
    body = cuda_source[start:]
    match = re.search(_KERNEL_DEF.format(name=re.escape(kernel_name)), body)
    if match is None:
        names = re.findall(r'extern\s+"C"\s+__global__\s+void\s+(?:__launch_bounds__\s*\([^)]*\)\s*)?(\w+)\s*\(', body)
        raise ValueError(f"kernel {kernel_name!r} not defined in the CUDA source (kernels: {sorted(set(names))})")
    depth, pos = 0, match.end() - 1
    for pos in range(match.end() - 1, len(body)):
        depth += {"{": 1, "}": -1}.get(body[pos], 0)
        if depth == 0:
            break
    if depth != 0:
        raise ValueError(f"kernel {kernel_name!r}: unbalanced braces in the CUDA source")
    return body[match.start() : pos + 1], _parse_params(match.group(1), kernel_name)


def check_emulatable(kernel_text: str, kernel_name: str = "kernel", *, cooperative: bool = False) -> None:
    """Raise :class:`EmulationNotValid` if the kernel needs cooperating threads or unsupported types.

    ``cooperative``: the threads of a block run as coroutines that meet at ``__syncthreads``, with
    ``__shared__`` memory and the warp matrix API (``nvcuda::wmma``) emulated (see
    ``_COOPERATIVE_PRELUDE``); only what that still cannot model is refused.
    """
    allowed = _COOPERATIVE_FEATURES if cooperative else ()
    found = [what for pattern, what in _UNSUPPORTED if what not in allowed and re.search(pattern, kernel_text)]
    if found:
        raise EmulationNotValid(
            f"emulation is not valid for kernel {kernel_name}: it uses {', '.join(found)}. Running "
            "(block, thread) pairs one after another cannot model shared memory, barriers or warp-level "
            "operations; check this kernel on a GPU instead."
        )


# --------------------------------------------------------------------------- C++ harness

_VECTOR_TYPES = [
    ("char", "char", 2, 2), ("char", "char", 4, 4),
    ("unsigned char", "uchar", 2, 2), ("unsigned char", "uchar", 4, 4),
    ("short", "short", 2, 4), ("short", "short", 4, 8),
    ("unsigned short", "ushort", 2, 4), ("unsigned short", "ushort", 4, 8),
    ("int", "int", 2, 8), ("int", "int", 3, 4), ("int", "int", 4, 16),
    ("unsigned int", "uint", 2, 8), ("unsigned int", "uint", 3, 4), ("unsigned int", "uint", 4, 16),
    ("float", "float", 2, 8), ("float", "float", 3, 4), ("float", "float", 4, 16),
    ("double", "double", 2, 16), ("double", "double", 3, 8), ("double", "double", 4, 16),
    ("long long", "longlong", 2, 16), ("long long", "longlong", 4, 16),
    ("unsigned long long", "ulonglong", 2, 16),
]
_FIELDS = "xyzw"


def _vector_type(ctype: str, prefix: str, n: int, align: int) -> str:
    name = f"{prefix}{n}"
    fields = ", ".join(_FIELDS[:n])
    args = ", ".join(f"{ctype} {f}" for f in _FIELDS[:n])
    sets = " ".join(f"v.{f} = {f};" for f in _FIELDS[:n])
    return (
        f"struct alignas({align}) {name} {{ {ctype} {fields}; }};\n"
        f"static inline {name} make_{name}({args}) {{ {name} v; {sets} return v; }}\n"
    )


_PRELUDE_HEAD = r"""
// sparsetir CUDA emulator prelude: CUDA C compiled as host C++, one (block, thread) at a time.
#include <cstdint>
#include <cstring>
#include <cmath>
#include <cfloat>
#include <climits>
struct sparsetir_uint3 { unsigned int x, y, z; };
static sparsetir_uint3 threadIdx, blockIdx, blockDim, gridDim;
#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __noinline__
#define __inline__ inline
#define __launch_bounds__(...)
#define __restrict__ __restrict
#define __align__(n) alignas(n)
typedef unsigned int uint;
typedef unsigned char uchar;
typedef unsigned short ushort;
"""

_PRELUDE_TAIL = r"""
template <class A, class B> static inline auto min(A a, B b) -> decltype(a + b) { return b < a ? b : a; }
template <class A, class B> static inline auto max(A a, B b) -> decltype(a + b) { return a < b ? b : a; }
// Atomics: no concurrency here, so a plain read-modify-write that returns the old value.
template <class T, class U> static inline T atomicAdd(T* p, U v) { T old = *p; *p = (T)(old + v); return old; }
// TVM wraps atomicAdd in a helper defined in the part of the source the emulator drops
template <class T> static inline T tvm_builtin_cuda_atomic_add(T* p, T v) { return atomicAdd(p, v); }
template <class T, class U> static inline T atomicSub(T* p, U v) { T old = *p; *p = (T)(old - v); return old; }
template <class T, class U> static inline T atomicMax(T* p, U v) { T old = *p; if (old < (T)v) *p = (T)v; return old; }
template <class T, class U> static inline T atomicMin(T* p, U v) { T old = *p; if ((T)v < old) *p = (T)v; return old; }
template <class T, class U> static inline T atomicExch(T* p, U v) { T old = *p; *p = (T)v; return old; }
template <class T, class U, class V> static inline T atomicCAS(T* p, U cmp, V v) {
  T old = *p; if (old == (T)cmp) *p = (T)v; return old;
}
// sparsetir's atomic max/min (backend.cuda.ATOMIC_HELPERS on a GPU): sequential here
template <class T, class U> static inline T sparsetir_atomic_max(T* p, U v) { T old = *p; if ((T)v != (T)v || old < (T)v) *p = (T)v; return old; }
template <class T, class U> static inline T sparsetir_atomic_min(T* p, U v) { T old = *p; if ((T)v != (T)v || (T)v < old) *p = (T)v; return old; }
#define CUDART_INF_F (__builtin_inff())
#define CUDART_INF (__builtin_inf())
#define CUDART_NAN_F (__builtin_nanf(""))
#define CUDART_NAN (__builtin_nan(""))
template <class T> static inline T __ldg(const T* p) { return *p; }
static inline void __threadfence() {}
static inline void __threadfence_block() {}
// glibc declares these names itself, so map them with macros rather than defining them.
#define __expf(x) expf(x)
#define __logf(x) logf(x)
#define __log2f(x) log2f(x)
#define __sinf(x) sinf(x)
#define __cosf(x) cosf(x)
#define __tanf(x) tanf(x)
#define __powf(x, y) powf(x, y)
static inline float __fdividef(float x, float y) { return x / y; }
static inline float __frcp_rn(float x) { return 1.0f / x; }
static inline float __fsqrt_rn(float x) { return sqrtf(x); }
static inline float rsqrtf(float x) { return 1.0f / sqrtf(x); }
static inline double rsqrt(double x) { return 1.0 / sqrt(x); }
static inline float __saturatef(float x) { return x < 0.f ? 0.f : (x > 1.f ? 1.f : x); }
static inline int __float_as_int(float x) { int r; std::memcpy(&r, &x, 4); return r; }
static inline unsigned __float_as_uint(float x) { unsigned r; std::memcpy(&r, &x, 4); return r; }
static inline float __int_as_float(int x) { float r; std::memcpy(&r, &x, 4); return r; }
static inline float __uint_as_float(unsigned x) { float r; std::memcpy(&r, &x, 4); return r; }
static inline int __popc(unsigned x) { return __builtin_popcount(x); }
static inline int __popcll(unsigned long long x) { return __builtin_popcountll(x); }
static inline int __clz(int x) { return x == 0 ? 32 : __builtin_clz((unsigned)x); }
static inline int __ffs(int x) { return __builtin_ffs(x); }
static inline int __mul24(int a, int b) { return a * b; }
"""

_PRELUDE_HALF = r"""
typedef _Float16 half;
typedef _Float16 __half;
struct alignas(4) half2 { half x, y; };
static inline half2 make_half2(half x, half y) { half2 v; v.x = x; v.y = y; return v; }
static inline half __float2half(float x) { return (half)x; }
static inline half __float2half_rn(float x) { return (half)x; }
static inline float __half2float(half x) { return (float)x; }
static inline half __hadd(half a, half b) { return a + b; }
static inline half __hsub(half a, half b) { return a - b; }
static inline half __hmul(half a, half b) { return a * b; }
static inline half __hdiv(half a, half b) { return a / b; }
static inline half __hfma(half a, half b, half c) { return a * b + c; }
static inline half __hmax(half a, half b) { return a < b ? b : a; }
static inline half __hmin(half a, half b) { return b < a ? b : a; }
static inline half hexp(half x) { return (half)expf((float)x); }
static inline half hlog(half x) { return (half)logf((float)x); }
static inline half hsqrt(half x) { return (half)sqrtf((float)x); }
"""


def _uses_half(text: str) -> bool:
    return re.search(r"\b(__)?half2?\b", text) is not None


_PRELUDE_BFLOAT16 = r"""
// bfloat16: the upper half of a float, rounded to nearest even (NaN kept quiet)
struct nv_bfloat16 {
  uint16_t bits;
  nv_bfloat16() = default;
  nv_bfloat16(float f) {
    uint32_t u; std::memcpy(&u, &f, 4);
    bits = (f != f) ? (uint16_t)((u >> 16) | 0x40) : (uint16_t)((u + 0x7FFF + ((u >> 16) & 1)) >> 16);
  }
  nv_bfloat16(double d) : nv_bfloat16((float)d) {}
  nv_bfloat16(int i) : nv_bfloat16((float)i) {}
  operator float() const { uint32_t u = (uint32_t)bits << 16; float f; std::memcpy(&f, &u, 4); return f; }
};
typedef nv_bfloat16 __nv_bfloat16;
struct alignas(4) nv_bfloat162 { nv_bfloat16 x, y; };
typedef nv_bfloat162 __nv_bfloat162;
static inline nv_bfloat162 make_nv_bfloat162(nv_bfloat16 x, nv_bfloat16 y) { nv_bfloat162 v; v.x = x; v.y = y; return v; }
static inline nv_bfloat16 __float2bfloat16(float x) { return nv_bfloat16(x); }
static inline nv_bfloat16 __float2bfloat16_rn(float x) { return nv_bfloat16(x); }
static inline float __bfloat162float(nv_bfloat16 x) { return (float)x; }
"""


def _uses_bfloat16(text: str) -> bool:
    return re.search(r"\b(__)?nv_bfloat162?\b", text) is not None


def _prelude(kernel_text: str) -> str:
    parts = [_PRELUDE_HEAD]
    parts += [_vector_type(*spec) for spec in _VECTOR_TYPES]
    if _uses_half(kernel_text):
        parts.append(_PRELUDE_HALF)
    if _uses_bfloat16(kernel_text):
        parts.append(_PRELUDE_BFLOAT16)
    parts.append(_PRELUDE_TAIL)
    return "".join(parts)


def _driver(kernel_name: str, params: list[KernelParam]) -> str:
    casts = ", ".join(
        f"({p.ctype})args[{i}]" if p.is_pointer else f"*({p.ctype}*)args[{i}]" for i, p in enumerate(params)
    )
    return f"""
extern "C" void sparsetir_emulate(void** args, const unsigned* dims) {{
  gridDim.x = dims[0]; gridDim.y = dims[1]; gridDim.z = dims[2];
  blockDim.x = dims[3]; blockDim.y = dims[4]; blockDim.z = dims[5];
  for (unsigned bz = 0; bz < gridDim.z; ++bz)
  for (unsigned by = 0; by < gridDim.y; ++by)
  for (unsigned bx = 0; bx < gridDim.x; ++bx) {{
    blockIdx.x = bx; blockIdx.y = by; blockIdx.z = bz;
    for (unsigned tz = 0; tz < blockDim.z; ++tz)
    for (unsigned ty = 0; ty < blockDim.y; ++ty)
    for (unsigned tx = 0; tx < blockDim.x; ++tx) {{
      threadIdx.x = tx; threadIdx.y = ty; threadIdx.z = tz;
      {kernel_name}({casts});
    }}
  }}
}}
"""


# --------------------------------------------------------------------------- cooperative blocks
#
# Threads that cooperate (shared memory, __syncthreads, tensor cores) cannot run one after the
# other to completion. In cooperative mode every thread of a block is a coroutine (ucontext) with
# its own stack: the driver resumes each in turn until it reaches a barrier (or ends), then starts
# the next round, so a barrier holds every thread until all have arrived. ``__shared__`` arrays
# become static storage, one copy for the block (blocks run one after another). A warp matrix
# fragment holds the whole tile in every thread: each thread of a warp loads, multiplies and
# stores the same tile, which together gives the warp's result (stores write equal values).

_COOPERATIVE_FEATURES = ("__shared__ memory", "__syncthreads barriers", "__syncwarp",
                         "tensor-core/cooperative/pipeline APIs")

_COOPERATIVE_PRELUDE = r"""
// ---- cooperative blocks: coroutine threads, barriers, shared memory, warp matrix fragments
#include <ucontext.h>
#include <type_traits>
#define __shared__ static
static ucontext_t sparsetir_scheduler;
static ucontext_t* sparsetir_contexts;
static unsigned sparsetir_current;
static void __syncthreads() { swapcontext(&sparsetir_contexts[sparsetir_current], &sparsetir_scheduler); }
static void __syncwarp(unsigned = 0xffffffffu) { __syncthreads(); }
namespace nvcuda { namespace wmma {
struct matrix_a {}; struct matrix_b {}; struct accumulator {};
struct row_major {}; struct col_major {};
enum layout_t { mem_row_major, mem_col_major };
template <class Use, int M, int N, int K, class T, class Layout = void> struct fragment {
  static constexpr int rows = std::is_same<Use, matrix_b>::value ? K : M;
  static constexpr int cols = std::is_same<Use, matrix_a>::value ? K : N;
  static constexpr int num_elements = rows * cols;
  T x[rows * cols];  // the whole tile, [row][col], in every thread of the warp
};
template <class Use, int M, int N, int K, class T, class L, class V>
static inline void fill_fragment(fragment<Use, M, N, K, T, L>& f, V v) {
  for (int i = 0; i < f.num_elements; ++i) f.x[i] = (T)v;
}
template <class Use, int M, int N, int K, class T, class L, class P>
static inline void load_matrix_sync(fragment<Use, M, N, K, T, L>& f, const P* p, unsigned ldm) {
  typedef fragment<Use, M, N, K, T, L> F;
  for (int r = 0; r < F::rows; ++r)
    for (int c = 0; c < F::cols; ++c)
      f.x[r * F::cols + c] = (T)(std::is_same<L, col_major>::value ? p[c * ldm + r] : p[r * ldm + c]);
}
template <int M, int N, int K, class T, class P>
static inline void load_matrix_sync(fragment<accumulator, M, N, K, T>& f, const P* p, unsigned ldm, layout_t layout) {
  for (int r = 0; r < M; ++r)
    for (int c = 0; c < N; ++c) f.x[r * N + c] = (T)(layout == mem_col_major ? p[c * ldm + r] : p[r * ldm + c]);
}
template <int M, int N, int K, class T, class P>
static inline void store_matrix_sync(P* p, const fragment<accumulator, M, N, K, T>& f, unsigned ldm, layout_t layout) {
  for (int r = 0; r < M; ++r)
    for (int c = 0; c < N; ++c) (layout == mem_col_major ? p[c * ldm + r] : p[r * ldm + c]) = (P)f.x[r * N + c];
}
template <int M, int N, int K, class TD, class TA, class LA, class TB, class LB, class TC>
static inline void mma_sync(fragment<accumulator, M, N, K, TD>& d, const fragment<matrix_a, M, N, K, TA, LA>& a,
                            const fragment<matrix_b, M, N, K, TB, LB>& b, const fragment<accumulator, M, N, K, TC>& c) {
  float out[M * N];
  for (int i = 0; i < M; ++i)
    for (int j = 0; j < N; ++j) {
      float sum = (float)c.x[i * N + j];
      for (int k = 0; k < K; ++k) sum += (float)a.x[i * K + k] * (float)b.x[k * N + j];
      out[i * N + j] = sum;
    }
  for (int i = 0; i < M * N; ++i) d.x[i] = (TD)out[i];
}
} }
"""

_DYNAMIC_SHARED = re.compile(r"extern\s+__shared__\s+(?:__align__\s*\(\s*\d+\s*\)\s*)?(\w+)\s+(\w+)\s*\[\s*\]\s*;")
_DYNAMIC_SHARED_BYTES = 1 << 20


def _cooperative_kernel_text(kernel_text: str) -> str:
    """Dynamic shared memory (``extern __shared__ T buf[];``) as a static array of 1 MiB, and
    ``__shared__ alignas(n)`` as ``alignas(n) static`` (C++ wants the attribute first)."""
    text = _DYNAMIC_SHARED.sub(
        lambda m: f"alignas(64) static {m.group(1)} {m.group(2)}[{_DYNAMIC_SHARED_BYTES} / sizeof({m.group(1)})];",
        kernel_text)
    return re.sub(r"__shared__\s+(alignas\s*\(\s*\d+\s*\)|__align__\s*\(\s*\d+\s*\))", r"\1 static", text)


def _cooperative_driver(kernel_name: str, params: list[KernelParam]) -> str:
    """Every block in turn; its threads as coroutines, resumed round by round until all have ended."""
    casts = ", ".join(
        f"({p.ctype})sparsetir_args[{i}]" if p.is_pointer else f"*({p.ctype}*)sparsetir_args[{i}]"
        for i, p in enumerate(params)
    )
    return f"""
#include <vector>
static void** sparsetir_args;
static std::vector<char> sparsetir_ended;
static void sparsetir_thread() {{
  {kernel_name}({casts});
  sparsetir_ended[sparsetir_current] = 1;
}}
extern "C" void sparsetir_emulate(void** args, const unsigned* dims) {{
  const size_t stack_bytes = 256 * 1024;
  gridDim.x = dims[0]; gridDim.y = dims[1]; gridDim.z = dims[2];
  blockDim.x = dims[3]; blockDim.y = dims[4]; blockDim.z = dims[5];
  sparsetir_args = args;
  const unsigned threads = blockDim.x * blockDim.y * blockDim.z;
  std::vector<ucontext_t> contexts(threads);
  std::vector<char> stacks((size_t)threads * stack_bytes);
  sparsetir_contexts = contexts.data();
  for (unsigned bz = 0; bz < gridDim.z; ++bz)
  for (unsigned by = 0; by < gridDim.y; ++by)
  for (unsigned bx = 0; bx < gridDim.x; ++bx) {{
    blockIdx.x = bx; blockIdx.y = by; blockIdx.z = bz;
    sparsetir_ended.assign(threads, 0);
    for (unsigned t = 0; t < threads; ++t) {{
      getcontext(&contexts[t]);
      contexts[t].uc_stack.ss_sp = stacks.data() + (size_t)t * stack_bytes;
      contexts[t].uc_stack.ss_size = stack_bytes;
      contexts[t].uc_link = &sparsetir_scheduler;
      makecontext(&contexts[t], sparsetir_thread, 0);
    }}
    for (unsigned left = threads; left > 0;) {{
      left = 0;
      for (unsigned t = 0; t < threads; ++t) {{
        if (sparsetir_ended[t]) continue;
        threadIdx.x = t % blockDim.x; threadIdx.y = (t / blockDim.x) % blockDim.y;
        threadIdx.z = t / (blockDim.x * blockDim.y);
        sparsetir_current = t;
        swapcontext(&sparsetir_scheduler, &contexts[t]);
        left += !sparsetir_ended[t];
      }}
    }}
  }}
}}
"""


_CXX_FLAGS = ["-O1", "-std=c++17", "-shared", "-fPIC", "-fno-strict-aliasing", "-w"]


def compile_emulator(cuda_source: str, kernel_name: str, *, cooperative: bool = False) -> tuple[Path, list[KernelParam]]:
    """Compile ``kernel_name`` from the CUDA source into a host library (cached by content hash).

    ``cooperative``: the threads of each block run as coroutines (``_cooperative_driver``), so
    shared memory, barriers and the warp matrix API work.
    """
    kernel_text, params = _kernel_definition(cuda_source, kernel_name)
    check_emulatable(kernel_text, kernel_name, cooperative=cooperative)
    if cooperative:
        kernel_text = _cooperative_kernel_text(kernel_text)
        code = (_prelude(kernel_text) + _COOPERATIVE_PRELUDE + "\n" + kernel_text + "\n"
                + _cooperative_driver(kernel_name, params))
    else:
        code = _prelude(kernel_text) + "\n" + kernel_text + "\n" + _driver(kernel_name, params)
    cxx = os.environ.get("CXX") or "g++"
    if shutil.which(cxx) is None:
        raise EmulationError(f"C++ compiler {cxx!r} not found (set $CXX)")
    digest = hashlib.sha256((code + " ".join([cxx, *_CXX_FLAGS])).encode()).hexdigest()[:20]
    out_dir = cache_root() / "cuda_emulator"
    lib = out_dir / f"{kernel_name[:60]}-{digest}.so"
    if lib.is_file():
        return lib, params
    src = out_dir / f"{kernel_name[:60]}-{digest}.cpp"
    out_dir.mkdir(parents=True, exist_ok=True)
    src.write_text(code)
    compile_shared_library([cxx, *_CXX_FLAGS], src, lib, error=EmulationError)
    return lib, params


# --------------------------------------------------------------------------- running

_GUARD = 4096  # bytes of canary before and after every buffer; keeps page alignment
_CANARY = 0xA5

_CHILD = r"""
import ctypes, json, mmap, os, sys
spec = json.loads(sys.argv[1])
keep, ptrs = [], []
for arg in spec["args"]:
    if "file" in arg:
        fd = os.open(arg["file"], os.O_RDWR)
        mm = mmap.mmap(fd, arg["total"])
        keep.append(mm)
        ptrs.append(ctypes.addressof(ctypes.c_char.from_buffer(mm)) + arg["offset"])
    else:
        buf = ctypes.create_string_buffer(bytes.fromhex(arg["scalar"]), 16)
        keep.append(buf)
        ptrs.append(ctypes.addressof(buf))
lib = ctypes.CDLL(spec["lib"])
lib.sparsetir_emulate((ctypes.c_void_p * max(1, len(ptrs)))(*ptrs), (ctypes.c_uint * 6)(*spec["dims"]))
for mm in keep:
    if isinstance(mm, mmap.mmap):
        mm.flush()
"""


def _dims(extents, what: str) -> list[int]:
    values = [int(v) for v in (tuple(extents) if np.iterable(extents) else (extents,))]
    if not 1 <= len(values) <= 3 or any(v < 0 for v in values):
        raise ValueError(f"{what} must be 1 to 3 non-negative extents, got {extents!r}")
    return values + [1] * (3 - len(values))


def _check_args(kernel_name: str, params: list[KernelParam], args: list) -> list:
    if len(args) != len(params):
        raise TypeError(
            f"kernel {kernel_name} takes {len(params)} arguments ({', '.join(p.name for p in params)}), got {len(args)}"
        )
    checked = []
    for p, a in zip(params, args):
        if p.is_pointer:
            if not isinstance(a, np.ndarray):
                raise TypeError(f"kernel {kernel_name}: {p.name} is a pointer ({p.ctype}); pass a numpy array")
            if a.dtype != np.dtype(p.dtype):
                raise TypeError(f"kernel {kernel_name}: {p.name} is {p.ctype}, needs dtype {p.dtype}, got {a.dtype}")
            checked.append(a)
        else:
            if isinstance(a, np.ndarray) and a.ndim > 0:
                raise TypeError(f"kernel {kernel_name}: {p.name} is a scalar ({p.ctype}), got an array")
            if np.issubdtype(np.dtype(p.dtype), np.integer) and not float(a).is_integer():
                raise TypeError(f"kernel {kernel_name}: {p.name} is {p.ctype}, got non-integer {a!r}")
            checked.append(np.asarray(a).astype(p.dtype).reshape(()))
    return checked


class _GuardedBuffers:
    """Copies of the array arguments with canaries on both sides, in memory or in shared files."""

    def __init__(self, arrays: list, shared_dir: str | None):
        self.views, self.backings, self.files = [], [], []
        first_use: dict[int, int] = {}  # the same array passed twice shares one buffer
        for i, arr in enumerate(arrays):
            if arr is None:
                self._add(None, None, None)
                continue
            if id(arr) in first_use:
                j = first_use[id(arr)]
                self._add(self.views[j], self.backings[j], self.files[j])
                continue
            first_use[id(arr)] = i
            total = _GUARD + max(arr.nbytes, 1) + _GUARD
            if shared_dir is not None:
                path = os.path.join(shared_dir, f"arg{i}.bin")
                backing = np.memmap(path, dtype=np.uint8, mode="w+", shape=(total,))
            else:
                path = None
                raw = np.empty(total + 4096, dtype=np.uint8)
                start = (-raw.ctypes.data) % 4096
                backing = raw[start : start + total]
            backing[:] = _CANARY
            view = backing[_GUARD : _GUARD + arr.nbytes].view(arr.dtype).reshape(arr.shape)
            view[...] = arr
            self._add(view, backing, path)

    def _add(self, view, backing, path) -> None:
        self.views.append(view)
        self.backings.append(backing)
        self.files.append(path)

    def check_canaries(self, kernel_name: str, params: list[KernelParam]) -> None:
        for p, view, backing in zip(params, self.views, self.backings):
            if backing is None:
                continue
            head = np.flatnonzero(backing[:_GUARD] != _CANARY)
            tail = np.flatnonzero(backing[_GUARD + view.nbytes : _GUARD + view.nbytes + _GUARD] != _CANARY)
            if head.size or tail.size:
                where = []
                if head.size:
                    where.append(f"{_GUARD - head[0]} bytes before the start")
                if tail.size:
                    where.append(f"{tail[-1] + 1} bytes past the end")
                raise EmulationError(
                    f"kernel {kernel_name} wrote outside {p.name} ({' and '.join(where)}; "
                    f"buffer is {view.nbytes} bytes)"
                )


def _shared_dir_parent(nbytes: int) -> str | None:
    """``/dev/shm`` when it can hold ``nbytes`` (it is often small in containers), else the temp dir."""
    shm = "/dev/shm"
    if os.path.isdir(shm) and os.access(shm, os.W_OK) and shutil.disk_usage(shm).free > 2 * nbytes + (64 << 20):
        return shm
    return None


def emulate_kernel(
    cuda_source: str,
    kernel_name: str,
    args: list,
    grid,
    block,
    *,
    isolate: bool = True,
    timeout_s: float | None = 600.0,
    cooperative: bool = False,
) -> None:
    """Run ``kernel_name`` from ``cuda_source`` for every (block, thread), updating arrays in place.

    ``args`` follow the kernel's parameter list: numpy arrays for pointers (dtype must match the
    C type) and Python/numpy numbers for scalars.  ``grid`` and ``block`` are 1 to 3 extents
    (x, y, z).  With ``isolate`` (the default) the kernel runs in a child process, so a crash or
    an infinite loop raises :class:`EmulationError` instead of taking this process down.  Any
    write outside an array's bounds (up to 4 KiB away) raises :class:`EmulationError`.
    Raises :class:`EmulationNotValid` for kernels that use shared memory, barriers or warp ops,
    unless ``cooperative`` (the threads of a block then run as coroutines meeting at barriers, and
    ``__shared__`` memory and ``nvcuda::wmma`` fragments are emulated).
    """
    lib, params = compile_emulator(cuda_source, kernel_name, cooperative=cooperative)
    checked = _check_args(kernel_name, params, list(args))
    dims = _dims(grid, "grid") + _dims(block, "block")
    arrays = [a if p.is_pointer else None for p, a in zip(params, checked)]
    for p, a in zip(params, arrays):
        if a is not None and not a.flags.writeable:
            raise TypeError(f"kernel {kernel_name}: array for {p.name} is read-only")
    if isolate:
        nbytes = sum(a.nbytes + 2 * _GUARD for a in arrays if a is not None)
        with tempfile.TemporaryDirectory(prefix="sparsetir-emu-", dir=_shared_dir_parent(nbytes)) as tmp:
            buffers = _GuardedBuffers(arrays, tmp)
            spec_args = []
            for p, a, path, backing in zip(params, checked, buffers.files, buffers.backings):
                if p.is_pointer:
                    backing.flush()
                    spec_args.append({"file": path, "total": int(backing.size), "offset": _GUARD})
                else:
                    spec_args.append({"scalar": a.tobytes().hex()})
            spec = json.dumps({"lib": str(lib), "dims": dims, "args": spec_args})
            try:
                proc = subprocess.run(
                    [sys.executable, "-c", _CHILD, spec], capture_output=True, text=True, timeout=timeout_s
                )
            except subprocess.TimeoutExpired as err:
                raise EmulationError(f"emulated kernel {kernel_name} did not finish in {timeout_s} s") from err
            if proc.returncode != 0:
                code = proc.returncode
                cause = f"signal {signal.Signals(-code).name}" if code < 0 else f"exit {code}"
                raise EmulationError(
                    f"emulated kernel {kernel_name} crashed ({cause}); likely an out-of-bounds access\n"
                    f"{proc.stderr[-2000:]}"
                )
            _finish(kernel_name, params, buffers, arrays)
    else:
        buffers = _GuardedBuffers(arrays, None)
        ptrs = []
        for p, a, view in zip(params, checked, buffers.views):
            ptrs.append(view.ctypes.data if p.is_pointer else a.ctypes.data)
        fn = ctypes.CDLL(str(lib)).sparsetir_emulate
        fn.restype = None
        fn((ctypes.c_void_p * max(1, len(ptrs)))(*ptrs), (ctypes.c_uint * 6)(*dims))
        _finish(kernel_name, params, buffers, arrays)


def _finish(kernel_name, params, buffers: _GuardedBuffers, arrays) -> None:
    buffers.check_canaries(kernel_name, params)
    for arr, view in zip(arrays, buffers.views):
        if arr is not None:
            np.copyto(arr, view)


# --------------------------------------------------------------------------- launches from TVM


@dataclass
class KernelLaunch:
    """One ``call_ffi_kernel`` in TVM's host code: kernel symbol, operand and launch expressions."""

    kernel: str
    operands: list  # one tirx expression per kernel parameter
    grid: tuple  # (x, y, z) extents as tirx expressions
    block: tuple
    dyn_shared_bytes: object = None


def _default_target():
    return {"kind": "cuda", "arch": "sm_90"}


def lower_to_launches(scheduled_mod, target=None):
    """Run TVM's default TIR pipeline and return the module right after ``SplitHostDevice``.

    At that point the host functions still take buffers (so size variables are the PrimFunc's
    own) and every kernel launch is an explicit ``tirx.call_ffi_kernel`` with its extents.
    """

    if isinstance(scheduled_mod, tvm.tirx.PrimFunc):
        scheduled_mod = tvm.IRModule({"main": scheduled_mod})
    tgt = tvm.target.Target(target or _default_target())
    if tgt.host is None:
        tgt = tgt.with_host(tvm.target.Target({"kind": "llvm"}))
    captured = {}

    @tvm.instrument.pass_instrument
    class _Capture:
        def run_after_pass(self, mod, info):
            if info.name.endswith("SplitHostDevice"):
                captured["mod"] = mod

    bound = tvm.tirx.transform.BindTarget(tgt)(scheduled_mod)
    pipeline = tvm.tirx.get_tir_pipeline("default")[0]
    with tvm.transform.PassContext(instruments=[_Capture()]), tgt:
        pipeline(bound)
    if "mod" not in captured:
        raise RuntimeError("TVM's pipeline did not run SplitHostDevice; cannot find kernel launches")
    return captured["mod"]


def _host_functions(lowered):

    out = {}
    for gv, func in lowered.functions.items():
        if isinstance(func, tvm.tirx.PrimFunc) and func.attrs is not None and "tirx.is_global_func" not in func.attrs:
            out[gv.name_hint] = func
    return out


def _launches_in(func) -> list[KernelLaunch]:

    calls = []

    def visit(node):
        if isinstance(node.op, tvm.ir.Op) and node.op.name == "tirx.call_ffi_kernel":
            calls.append(node)

    tvm_ffi.structural_walk(func.body, [(tvm.ir.expr.Call, visit)], order="pre")
    launches = []
    for call in calls:
        tags = list(call.attrs.launch_params)
        symbol = str(call.args[0].value)
        values = list(call.args[1:])
        n_launch = sum(1 for t in tags if t.startswith(("blockIdx.", "threadIdx.")) or "dyn_shared" in t)
        operands, launch_values = values[: len(values) - n_launch], values[len(values) - n_launch :]
        extents = {"blockIdx": [1, 1, 1], "threadIdx": [1, 1, 1]}
        dyn = None
        it = iter(launch_values)
        for tag in tags:
            if tag.startswith(("blockIdx.", "threadIdx.")):
                kind, axis = tag.split(".")
                extents[kind]["xyz".index(axis)] = next(it)
            elif "dyn_shared" in tag:
                dyn = next(it)
        launches.append(KernelLaunch(symbol, operands, tuple(extents["blockIdx"]), tuple(extents["threadIdx"]), dyn))
    return launches


def kernel_launches(scheduled_mod, target=None) -> dict[str, list[KernelLaunch]]:
    """Kernel launches of every host function of a scheduled module, in host order, symbolically."""
    lowered = lower_to_launches(scheduled_mod, target)
    return {name: _launches_in(func) for name, func in _host_functions(lowered).items()}


def _let_bindings(func) -> dict:

    lets = {}

    def visit(node):
        lets[node.var] = node.value

    tvm_ffi.structural_walk(func.body, [((tvm.tirx.LetStmt, tvm.tirx.Bind, tvm.tirx.Let), visit)])
    return lets


def _evaluate(expr, sizes: dict, lets: dict, what: str, _depth: int = 0) -> int:
    """Integer value of a tirx expression given size values by variable name."""

    if isinstance(expr, int):
        return expr
    free = []
    tvm_ffi.structural_walk(expr, [(tvm.ir.expr.Var, free.append)])
    analyzer = Analyzer()
    for var in {v.name: v for v in free}.values():
        if var.name in sizes:
            analyzer.bind(var, tvm.tirx.const(int(sizes[var.name]), str(var.ty)))
        elif var in lets and _depth < 32:
            analyzer.bind(var, tvm.tirx.const(_evaluate(lets[var], sizes, lets, what, _depth + 1), str(var.ty)))
        else:
            raise KeyError(f"{what} = {expr} depends on {var.name!r}; pass it in sizes")
    value = analyzer.simplify(expr)
    if not isinstance(value, tvm.tirx.IntImm):
        raise ValueError(f"{what} = {expr} does not reduce to an integer (got {value})")
    return int(value.value)


def launch_dims(scheduled_mod, target=None, sizes: dict[str, int] | None = None) -> dict[str, tuple[tuple, tuple]]:
    """``{kernel: ((gx, gy, gz), (bx, by, bz))}`` for the given size-variable values.

    ``sizes`` maps variable names (e.g. ``{"m": 1000, "nnz": 5000}``) to values; only the ones
    the launch extents use are needed.  If a kernel is launched more than once, the first launch
    is reported.
    """
    sizes = dict(sizes or {})
    result = {}
    lowered = lower_to_launches(scheduled_mod, target)
    for func in _host_functions(lowered).values():
        lets = _let_bindings(func)
        for launch in _launches_in(func):
            if launch.kernel in result:
                continue
            name = launch.kernel
            grid = tuple(_evaluate(e, sizes, lets, f"{name} gridDim.{a}") for e, a in zip(launch.grid, "xyz"))
            block = tuple(_evaluate(e, sizes, lets, f"{name} blockDim.{a}") for e, a in zip(launch.block, "xyz"))
            result[launch.kernel] = (grid, block)
    return result


def _param_buffers(func):
    """(name, shape exprs or None for scalars, dtype, var) for each PrimFunc parameter."""

    out = []
    for var in func.params:
        ty = getattr(var, "ty", None)
        if isinstance(ty, tvm.tirx.BufferType):
            out.append((var.name, list(ty.shape), str(ty.dtype), var))
        else:
            out.append((var.name, None, str(var.ty), var))
    return out


def _resolve_operand(expr, decl_data: dict, by_var: dict):
    """Map a kernel operand expression (``buffer_data(X)``) back to the PrimFunc parameter X."""

    seen = 0
    while isinstance(expr, tvm.ir.expr.Call) and isinstance(expr.op, tvm.ir.Op) and expr.op.name == "tirx.buffer_data":
        var = expr.args[0]
        if var in by_var:
            return by_var[var]
        if var not in decl_data or seen > 32:
            break
        expr, seen = decl_data[var], seen + 1
    return None


def emulate_module(
    scheduled_mod,
    cuda_source: str,
    args,
    *,
    target=None,
    sizes: dict[str, int] | None = None,
    func_name: str | None = None,
    isolate: bool = True,
    cooperative: bool = False,
) -> dict[str, int]:
    """Emulate every kernel launch of a scheduled module on numpy arrays, updating them in place.

    ``args`` are the host PrimFunc's arguments, as a list in parameter order or a dict by name.
    Size variables are read from the arrays' shapes (``sizes`` can add or override values).
    ``cuda_source`` is the module's generated CUDA C (``CudaBuildResult.source``).  Only host code
    that is a straight sequence of launches is supported.  Returns the sizes used. ``cooperative``
    is passed to :func:`emulate_kernel` (kernels with shared memory, barriers or tensor cores).
    """

    lowered = lower_to_launches(scheduled_mod, target)
    hosts = _host_functions(lowered)
    if func_name is None:
        if len(hosts) != 1:
            raise ValueError(f"module has host functions {sorted(hosts)}; pass func_name")
        func_name = next(iter(hosts))
    func = hosts[func_name]
    params = _param_buffers(func)
    if isinstance(args, dict):
        unknown = set(args) - {p[0] for p in params}
        if unknown:
            raise TypeError(f"{func_name} has no parameters {sorted(unknown)}")
        bound = {p[0]: args[p[0]] for p in params if p[0] in args}
    else:
        if len(args) != len(params):
            raise TypeError(f"{func_name} takes {len(params)} arguments ({[p[0] for p in params]}), got {len(args)}")
        bound = {p[0]: a for p, a in zip(params, args)}

    known: dict[str, int] = {}
    for name, shape, dtype, _var in params:
        if name not in bound:
            if shape is None:
                continue  # a scalar size: read off the array shapes below
            raise TypeError(f"missing argument {name!r} of {func_name}")
        value = bound[name]
        if shape is None:
            known[name] = value
            continue
        if not isinstance(value, np.ndarray) or value.dtype != np.dtype(dtype):
            raise TypeError(f"argument {name} must be a numpy array of dtype {dtype}")
        if value.ndim != len(shape):
            raise ValueError(f"argument {name} must have {len(shape)} dimensions, got shape {value.shape}")
        for dim, extent in zip(shape, value.shape):
            if isinstance(dim, tvm.ir.expr.Var) and dim.name not in (sizes or {}):
                if known.setdefault(dim.name, extent) != extent:
                    raise ValueError(
                        f"size {dim.name} is {known[dim.name]} from an earlier argument but {extent} from {name}"
                    )
    known.update(sizes or {})
    for name, shape, _dtype, _var in params:
        if shape is None:
            if name not in bound:
                if name not in known:
                    raise TypeError(f"missing argument {name!r} of {func_name} (no array shape gives it)")
                bound[name] = known[name]
            continue
        expected = tuple(_evaluate(d, known, {}, f"{name}.shape") for d in shape)
        if tuple(bound[name].shape) != expected:
            raise ValueError(f"argument {name} has shape {bound[name].shape}, expected {expected}")

    decl_data = {}
    tvm_ffi.structural_walk(func.body, [(tvm.tirx.DeclBuffer, lambda s: decl_data.__setitem__(s.buffer, s.data))])
    by_var = {var: name for name, _shape, _dtype, var in params}
    lets = _let_bindings(func)
    device_params = {
        gv.name_hint: f
        for gv, f in lowered.functions.items()
        if f.attrs is not None and "tirx.is_global_func" in f.attrs
    }
    # Buffers the host allocates (a kernel's intermediates): one array each, for every launch,
    # starting as NaN (or -1) so a read before any write shows.
    allocated = {}

    def on_alloc(stmt):
        buffer = stmt.buffer
        shape = tuple(_evaluate(d, known, lets, f"{buffer.name}.shape") for d in buffer.shape)
        fill = np.nan if np.dtype(str(buffer.dtype)).kind == "f" else -1
        allocated[buffer] = np.full(shape, fill, dtype=str(buffer.dtype))

    tvm_ffi.structural_walk(func.body, [(tvm.tirx.AllocBuffer, on_alloc)])
    by_var.update({buffer: f"__alloc_{buffer.name}" for buffer in allocated})
    bound.update({f"__alloc_{buffer.name}": array for buffer, array in allocated.items()})
    for launch in _launches_in(func):
        kernel_args = []
        for i, operand in enumerate(launch.operands):
            param_name = _resolve_operand(operand, decl_data, by_var)
            if param_name is not None:
                kernel_args.append(bound[param_name])
            elif isinstance(operand, tvm.ir.expr.Call):
                raise ValueError(f"{launch.kernel}: cannot map operand #{i} ({operand}) to a parameter of {func_name}")
            else:
                kernel_args.append(_evaluate(operand, known, lets, f"{launch.kernel} operand #{i}"))
        if launch.kernel in device_params and len(device_params[launch.kernel].params) != len(kernel_args):
            raise ValueError(f"{launch.kernel}: operand count does not match the device function")
        grid = [_evaluate(e, known, lets, f"{launch.kernel} grid") for e in launch.grid]
        block = [_evaluate(e, known, lets, f"{launch.kernel} block") for e in launch.block]
        emulate_kernel(cuda_source, launch.kernel, kernel_args, grid, block, isolate=isolate, cooperative=cooperative)
    return known
