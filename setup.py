"""Builds the PyTorch extension warpflash._C: small C++ files of operators
(python/warpflash/csrc/*.cpp) linked with the CUDA kernel library libwarpflash.a.

The kernel library comes from WARPFLASH_PREBUILT_LIB (a libwarpflash.a built elsewhere, e.g.
by ./scripts/build.sh on a machine without a GPU) or is built here with CMake into
build-python/ (WARPFLASH_HEAD_DIMS and WARPFLASH_DTYPES select a subset, as in CMake).
"""
import os
import subprocess
import sys
from pathlib import Path

from setuptools import setup
from torch.utils.cpp_extension import BuildExtension, CUDAExtension

ROOT = Path(__file__).resolve().parent


def kernel_library() -> str:
    prebuilt = os.environ.get("WARPFLASH_PREBUILT_LIB")
    if prebuilt:
        if not Path(prebuilt).is_file():
            sys.exit(f"WARPFLASH_PREBUILT_LIB={prebuilt} does not exist")
        return str(Path(prebuilt).resolve())
    build_dir = ROOT / "build-python"
    subprocess.check_call([str(ROOT / "scripts" / "setup.sh")])
    args = ["cmake", "-S", str(ROOT), "-B", str(build_dir), "-DWARPFLASH_BUILD_TESTS=OFF",
            "-DWARPFLASH_BUILD_BENCH=OFF"]
    for name in ("WARPFLASH_HEAD_DIMS", "WARPFLASH_DTYPES", "CUTLASS_DIR"):
        if os.environ.get(name):
            args.append(f"-D{name}={os.environ[name]}")
    subprocess.check_call(args)
    subprocess.check_call(["cmake", "--build", str(build_dir), "--target", "warpflash", "--parallel"])
    return str(build_dir / "src" / "libwarpflash.a")


class BuildWithKernelLibrary(BuildExtension):
    """Gets the kernel library only when the extension is really built (not for metadata)."""

    def build_extensions(self):
        library = kernel_library()
        for extension in self.extensions:
            extension.extra_objects.append(library)
        super().build_extensions()


setup(
    ext_modules=[
        CUDAExtension(
            name="warpflash._C",
            sources=[f"python/warpflash/csrc/{name}.cpp" for name in ("torch_ops", "quantize_ops", "kvcache_ops")],
            include_dirs=[str(ROOT / "include")],
            extra_compile_args={"cxx": ["-O2", "-std=c++17"]},
        )
    ],
    cmdclass={"build_ext": BuildWithKernelLibrary},
    # setuptools' own build folder, kept apart from CMake's build/.
    options={"build": {"build_base": "build-python/setuptools"}},
)
