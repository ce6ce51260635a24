"""Prints the directory under PREFIX, on this interpreter's import path,
that packages are installed in; prints nothing if it has none there.

    python3 site_dir.py PREFIX

meson runs it at configure time (src/python/crnet/meson.build): on Debian,
meson 1.0 installs modules for /usr/bin/python3 under
PREFIX/lib/python3/dist-packages, which is on that interpreter's path for
PREFIX=/usr only; with the default prefix /usr/local the package would not
be importable. This names PREFIX/lib/python3.11/dist-packages there, the
site-packages of a venv whose prefix is PREFIX, and so on.
"""

import os
import site
import sys

prefix = os.path.normpath(os.path.abspath(sys.argv[1]))
candidates = []
if hasattr(site, "getsitepackages"):
    candidates += site.getsitepackages()
candidates += sys.path
for path in candidates:
    path = os.path.normpath(path)
    if not path.startswith(prefix + os.sep):
        continue
    # PREFIX/lib*/.../{site,dist}-packages: for PREFIX=/usr, not
    # /usr/local/lib/... (another prefix's).
    rel = os.path.relpath(path, prefix).split(os.sep)
    if rel[0].startswith("lib") and rel[-1] in ("site-packages", "dist-packages"):
        print(path)
        break
