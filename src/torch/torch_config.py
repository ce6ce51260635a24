"""What meson needs to build the torch backend against the interpreter's
torch: one "key value" per line (src/torch/meson.build reads them). Exits 1,
saying why on stderr, when that torch cannot have the backend.

    python3 torch_config.py PREFIX

"sitedir" is the directory under PREFIX on this interpreter's import path
that packages install to (Debian's /usr/bin/python3, prefix /usr/local:
/usr/local/lib/python3.11/dist-packages; meson 1.0 would pick
/usr/local/lib/python3/dist-packages, which that interpreter does not
search); absent when the interpreter has none under PREFIX."""
import os
import site
import sys

try:
    import torch
    import torch.distributed as dist
except ImportError as e:
    sys.exit(f"torch_config: {sys.executable} cannot import torch: {e}")
if not dist.is_available():
    sys.exit(f"torch_config: torch {torch.__version__} was built without "
             "torch.distributed")

root = os.path.dirname(torch.__file__)
print("version", torch.__version__)
# As torch.utils.cpp_extension.include_paths() and library_paths(), without
# importing that module (it probes for CUDA and says so on stderr).
print("include", os.path.join(root, "include"))
print("include", os.path.join(root, "include", "torch", "csrc", "api", "include"))
print("libdir", os.path.join(root, "lib"))
# The ABI torch was built with: the extension must match it, and pybind11
# must see the same internals to share torch's types (ProcessGroup, Store).
print("define", "-D_GLIBCXX_USE_CXX11_ABI=%d" % int(torch._C._GLIBCXX_USE_CXX11_ABI))
for name in ("COMPILER_TYPE", "STDLIB", "BUILD_ABI"):
    value = getattr(torch._C, "_PYBIND11_" + name, None)
    if value is not None:
        print("define", '-DPYBIND11_%s="%s"' % (name, value))

prefix = os.path.normpath(os.path.abspath(sys.argv[1])) if len(sys.argv) > 1 else None
if prefix is not None:
    for path in (site.getsitepackages() if hasattr(site, "getsitepackages")
                 else []) + sys.path:
        path = os.path.normpath(path)
        rel = os.path.relpath(path, prefix).split(os.sep)
        if (path.startswith(prefix + os.sep) and rel[0].startswith("lib")
                and rel[-1] in ("site-packages", "dist-packages")):
            print("sitedir", path)
            break
