#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""check_layers.py SRC_DIR DESIGN_MD: hold every quoted #include of the library's
sources against the table of allowed layer pairs in docs/design.md (between the
markers <!-- layers --> and <!-- /layers -->). Prints one line per violation and
exits 1 when there is any, 0 otherwise; 2 when the table cannot be read.

Rules (docs/design.md, "Layers"):
 1. an include names its layer ("net/net.h"), or is config.h or a public header;
 2. a layer includes only itself and the layers its row allows (no arrow up or
    sideways);
 3. inside a layer, a subfolder (transport/ib, coll/ring, ...) includes only its
    own files and the layer's top-level headers, never another subfolder's;
 4. a layer's *_internal.h is for its own files only, and a subfolder's headers
    are private to that subfolder.
"""
import os
import re
import sys

PUBLIC = {"config.h", "ibcoll.h", "ibcoll_cuda.h"}


def read_table(path):
    text = open(path).read()
    m = re.search(r"<!-- layers -->(.*?)<!-- /layers -->", text, re.S)
    if not m:
        return None
    allowed = {}
    for line in m.group(1).splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) < 4 or not cells[1].startswith("`src/"):
            continue
        layer = cells[1].strip("`").rstrip("/").split("/")[1]
        deps = re.findall(r"`(\w+)`", cells[3])
        allowed[layer] = set(deps)
    return allowed


def main():
    if len(sys.argv) != 3:
        print(__doc__.strip().splitlines()[0])
        return 2
    src, design = sys.argv[1], sys.argv[2]
    allowed = read_table(design)
    if not allowed:
        print("check_layers: no layer table between <!-- layers --> markers in %s" % design)
        return 2
    bad = []
    nfiles = 0
    for d, _, fs in os.walk(src):
        for f in sorted(fs):
            if not f.endswith((".c", ".h", ".cu", ".def")):
                continue
            path = os.path.join(d, f)
            rel = os.path.relpath(path, src).replace(os.sep, "/")
            parts = rel.split("/")
            if len(parts) < 2:
                continue
            layer = parts[0]
            sub = parts[1] if len(parts) > 2 else None
            nfiles += 1
            if layer not in allowed:
                bad.append("%s: folder src/%s is not a layer of the table" % (rel, layer))
                continue
            for n, line in enumerate(open(path, errors="replace"), 1):
                m = re.match(r'\s*#\s*include\s+"([^"]+)"', line)
                if not m:
                    continue
                inc = m.group(1)
                if inc in PUBLIC:
                    continue
                ip = inc.split("/")
                where = "%s:%d: #include \"%s\"" % (rel, n, inc)
                if len(ip) < 2 or ip[0] not in allowed:
                    bad.append("%s does not name its layer (write \"<layer>/%s\")" %
                               (where, os.path.basename(inc)))
                    continue
                tl = ip[0]
                tsub = ip[1] if len(ip) > 2 else None
                if tl != layer and tl not in allowed[layer]:
                    bad.append("%s: layer %s may not include layer %s (allowed: %s)" %
                               (where, layer, tl, ", ".join(sorted(allowed[layer])) or "none"))
                    continue
                if tl == layer and sub and tsub and tsub != sub:
                    bad.append("%s: %s/%s may not include its sibling %s/%s" %
                               (where, layer, sub, tl, tsub))
                    continue
                if ip[-1].endswith("_internal.h") and (tl != layer or tsub not in (None, sub)):
                    bad.append("%s: %s is private to src/%s" % (where, inc, "/".join(ip[:-1])))
                    continue
                if tsub and (tl != layer or tsub != sub):
                    bad.append("%s: %s is private to src/%s/%s" % (where, inc, tl, tsub))
    for b in bad:
        print(b)
    print("check_layers: %d files, %d violations" % (nfiles, len(bad)))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
