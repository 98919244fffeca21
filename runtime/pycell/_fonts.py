"""matplotlib's font list, built once for every run (src/run/fonts.c).

    _fonts.py

Run by the supervisor in a jail of the policy it is built for (so every
path in it is one a run sees), with /fonts its only writable directory
besides /tmp.  Writes /fonts/fontlist-vNNN.json (matplotlib's own cache
file, made by matplotlib) and /fonts/watch.json: the directories whose
change makes the list stale (the font directories matplotlib scans, the
interpreter's module directories, where a matplotlib would be installed
or upgraded), each with its modification time in nanoseconds.  Without
matplotlib only watch.json is written: the runs have nothing to gain
until one is installed.  No program of a user's runs here.
"""

import json
import os
import sys

OUT = "/fonts"


def _dirs_under(root, found):
    for top, subdirs, _files in os.walk(root):
        found.add(top)
        subdirs.sort()


def main():
    watch = set(p for p in sys.path if p and os.path.isdir(p) and not p.startswith("/run/pycell"))
    # before matplotlib is imported: its cache is the one this builds
    os.environ["MPLCONFIGDIR"] = OUT
    try:
        import matplotlib
    except ImportError:
        matplotlib = None
    if matplotlib is not None:
        from matplotlib import font_manager
        name = "fontlist-v%s.json" % font_manager.FontManager.__version__
        if not os.path.isfile(os.path.join(OUT, name)):
            print("pycell: matplotlib wrote no %s in %s" % (name, OUT), file=sys.stderr)
            return 1
        roots = [os.path.join(matplotlib.get_data_path(), "fonts")]
        roots += [os.path.normpath(d) for d in font_manager.X11FontDirectories if d.startswith("/usr/")]
        for root in roots:
            if os.path.isdir(root):
                _dirs_under(root, watch)
        watch.add(os.path.dirname(matplotlib.__file__))
    dirs = {}
    for d in sorted(watch):
        try:
            dirs[d] = os.stat(d).st_mtime_ns
        except OSError:
            pass
    with open(os.path.join(OUT, "watch.json"), "w") as f:
        json.dump({"matplotlib": matplotlib.__version__ if matplotlib else None, "dirs": dirs}, f)
    return 0


if __name__ == "__main__":
    sys.exit(main())
