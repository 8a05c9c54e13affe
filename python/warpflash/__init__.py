"""warpflash: FlashAttention-3 for NVIDIA Hopper GPUs."""
from warpflash.interface import (apply_rotary, flash_attn_fp8_func, flash_attn_func, flash_attn_varlen_func,
                                 flash_attn_with_kvcache, quantize_fp8)

__all__ = [
    "flash_attn_func", "flash_attn_varlen_func", "flash_attn_with_kvcache", "flash_attn_fp8_func", "quantize_fp8",
    "apply_rotary"
]
__version__ = "0.1.0"
