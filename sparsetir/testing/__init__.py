"""Test helpers for sparsetir: CPU emulation of generated CUDA kernels (``cuda_emulator``)."""
