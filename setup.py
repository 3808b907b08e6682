"""Maps the repository's top-level directories into one import namespace.

hdl/ -> cxlkv.hdl, models/ -> cxlkv.models, sw/ -> cxlkv.sw, tb/ -> cxlkv.tb, so that
nothing installs top-level modules called `models` or `sw`. Subpackages are found
under each directory; everything else lives in pyproject.toml.
"""
from setuptools import find_packages, setup

ROOTS = {"cxlkv": "cxlkv", "cxlkv.hdl": "hdl", "cxlkv.models": "models",
         "cxlkv.sw": "sw", "cxlkv.tb": "tb"}

packages = list(ROOTS)
for name, directory in ROOTS.items():
    packages += [f"{name}.{sub}" for sub in find_packages(directory)]

setup(
    packages=packages,
    package_dir=dict(ROOTS),
    # Data the code reads at run time: shipped traces, BI-snoop scenarios, register sources, C++ harness.
    package_data={"": ["*.npz", "*.jsonl", "*.rdl", "*.cpp", "*.h", "*.json"]},
)
