"""setup.py - pip install ./python: the rdmakit package and its cffi
extension, built against the installed librdmakit (pkg-config rdmakit;
librdmakit-dev) or a build tree (RDMAKIT_INCLUDE_DIR, RDMAKIT_LIBRARY_DIR)."""
from setuptools import setup

setup(
    name="rdmakit",
    version="0.1.0",
    description="RDMA RPC and one-sided transfers from Python over librdmakit",
    packages=["rdmakit"],
    package_data={"rdmakit": ["py.typed"]},
    python_requires=">=3.8",
    setup_requires=["cffi>=1.15"],
    install_requires=["cffi>=1.15"],
    cffi_modules=["rdmakit_build.py:ffibuilder"],
    zip_safe=False,
)
