"""`meson install` of the Python module, checked as a user would meet it.

    install_check.py BUILD_DIR PACKAGE_DIR LIBDIR BINDIR

(meson test python-install; PACKAGE_DIR, LIBDIR and BINDIR are the
configured absolute directories). The build tree is installed under a
temporary DESTDIR; then:
  - the package's files are there (the extension, __init__.py, the type
    stub and py.typed);
  - PACKAGE_DIR's parent is on this interpreter's import path, so that
    after a real install `import crnet` works with no PYTHONPATH;
  - the installed extension keeps no path into the build tree (its RUNPATH
    is LIBDIR);
  - the installed crlaunch runs examples/python/allreduce.py on 2 ranks
    against the installed package and libcrnet (DESTDIR put in front by
    PYTHONPATH and LD_LIBRARY_PATH, as the real paths are not populated).
Prints "ok" or "FAIL" per check; exits 1 if any failed. Needs NumPy for the
example: without it, that check is skipped, saying so.
"""

import glob
import os
import shutil
import site
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))


def main():
    build, pkg, libdir, bindir = sys.argv[1:5]
    fails = []

    def check(cond, what):
        print("%s %s" % ("ok  " if cond else "FAIL", what))
        if not cond:
            fails.append(what)
        return cond

    root = tempfile.mkdtemp(prefix="crnet-pyinstall-")
    try:
        meson = os.environ.get("MESON", "meson")
        r = subprocess.run([meson, "install", "-C", build, "--no-rebuild", "--destdir", root],
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        if not check(r.returncode == 0, "meson install --destdir"):
            print(r.stdout)
            return 1
        inst = root + pkg
        exts = glob.glob(os.path.join(inst, "_crnet*.so"))
        check(len(exts) == 1, "installed %s/_crnet*.so" % pkg)
        for f in ("__init__.py", "_crnet.pyi", "py.typed"):
            check(os.path.exists(os.path.join(inst, f)), "installed %s/%s" % (pkg, f))
        parent = os.path.dirname(pkg)
        on_path = [os.path.normpath(p) for p in sys.path + site.getsitepackages()]
        check(os.path.normpath(parent) in on_path,
              "%s is on %s's import path" % (parent, sys.executable))
        if exts:
            dyn = subprocess.run(["readelf", "-d", exts[0]], stdout=subprocess.PIPE,
                                 text=True).stdout
            paths = [line.split("[", 1)[1].rstrip("]") for line in dyn.splitlines()
                     if "RUNPATH" in line or "RPATH" in line]
            check(paths == [libdir], "the extension's run path is %s (%s)" % (libdir, paths))
            check(os.path.abspath(build) not in dyn, "no build-tree path in the extension")
        try:
            import numpy  # noqa: F401
        except ImportError:
            if os.environ.get("CRNET_TEST_STRICT") == "1":
                print("FAIL: the example cannot run: NumPy is not installed for %s "
                      "(CRNET_TEST_STRICT=1)" % sys.executable)
                return 1
            print("SKIP install_check (the example): NumPy is not installed for %s"
                  % sys.executable)
            return 1 if fails else 0
        env = dict(os.environ)
        env["PYTHONPATH"] = root + parent
        env["LD_LIBRARY_PATH"] = root + libdir
        example = os.path.join(os.path.dirname(os.path.dirname(HERE)), "examples", "python",
                               "allreduce.py")
        r = subprocess.run([root + bindir + "/crlaunch", "-n", "2", "--timeout", "60",
                            sys.executable, example], env=env, cwd=root,
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                           timeout=90)
        print(r.stdout.rstrip())
        check(r.returncode == 0 and "all results right" in r.stdout,
              "the installed crlaunch runs the example on the installed package")
        r = subprocess.run([sys.executable, "-c", "import crnet; print(crnet.__file__)"],
                           env=env, cwd=root, stdout=subprocess.PIPE, text=True)
        check(r.stdout.strip() == os.path.join(inst, "__init__.py"),
              "import crnet finds the installed package (%s)" % r.stdout.strip())
    finally:
        shutil.rmtree(root, ignore_errors=True)
    print("python install: %d check(s) failed" % len(fails) if fails else "python install: ok")
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main())
