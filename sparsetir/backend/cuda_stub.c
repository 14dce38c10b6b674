/*
 * Build-only stand-in for the NVIDIA driver library (libcuda.so.1).
 *
 * libtvm_runtime_cuda.so links against libcuda.so.1.  On a machine without the
 * driver it cannot be loaded, and TVM then silently builds CUDA modules that
 * carry source instead of a fatbin.  This stub defines exactly the driver
 * symbols that library imports, so it can be loaded and TVM's CUDA build path
 * (codegen + nvcc callback + module creation) runs.  Every entry point reports
 * CUDA_ERROR_NO_DEVICE (100); nothing here can run a kernel.
 *
 * It must only ever be loaded when no real libcuda.so.1 exists
 * (see sparsetir/build/cuda_stub.py).  The test in tests/build checks that the
 * symbol list below matches `nm -D --undefined-only libtvm_runtime_cuda.so`.
 */
#include <stddef.h>

#define STUB_NO_DEVICE 100 /* CUDA_ERROR_NO_DEVICE */

typedef int stub_result;

static const char stub_error_name[] = "CUDA_ERROR_NO_DEVICE";
static const char stub_error_text[] =
    "sparsetir build-only libcuda stub: no CUDA driver on this machine";

/* Marker so callers can tell this stub apart from the real driver. */
int sparsetir_cuda_stub_marker(void) { return 1; }

stub_result cuGetErrorName(stub_result error, const char **name) {
  (void)error;
  if (name != NULL) *name = stub_error_name;
  return 0;
}

stub_result cuGetErrorString(stub_result error, const char **text) {
  (void)error;
  if (text != NULL) *text = stub_error_text;
  return 0;
}

stub_result cuDeviceGetName(char *name, int len, int device) {
  (void)device;
  if (name != NULL && len > 0) name[0] = '\0';
  return STUB_NO_DEVICE;
}

stub_result cuModuleLoadData(void **module, const void *image) {
  (void)image;
  if (module != NULL) *module = NULL;
  return STUB_NO_DEVICE;
}

stub_result cuModuleUnload(void *module) {
  (void)module;
  return STUB_NO_DEVICE;
}

stub_result cuModuleGetFunction(void **function, void *module, const char *name) {
  (void)module;
  (void)name;
  if (function != NULL) *function = NULL;
  return STUB_NO_DEVICE;
}

stub_result cuFuncSetAttribute(void *function, int attribute, int value) {
  (void)function;
  (void)attribute;
  (void)value;
  return STUB_NO_DEVICE;
}

stub_result cuLaunchKernelEx(const void *config, void *function, void **params, void **extra) {
  (void)config;
  (void)function;
  (void)params;
  (void)extra;
  return STUB_NO_DEVICE;
}

stub_result cuTensorMapEncodeTiled(void *tensor_map, int data_type, unsigned rank,
                                   void *global_address, const unsigned long long *global_dim,
                                   const unsigned long long *global_strides,
                                   const unsigned *box_dim, const unsigned *element_strides,
                                   int interleave, int swizzle, int l2_promotion, int oob_fill) {
  (void)tensor_map; (void)data_type; (void)rank; (void)global_address; (void)global_dim;
  (void)global_strides; (void)box_dim; (void)element_strides; (void)interleave;
  (void)swizzle; (void)l2_promotion; (void)oob_fill;
  return STUB_NO_DEVICE;
}
