#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""gen_topo_xml.py - write the hwloc 2.x XML machines of tests/topo/.

The files are checked in; this script documents how they were made and
regenerates them (python3 gen_topo_xml.py [outdir]). The CPU part follows
what `lstopo --input "pack:2 [numa] core:8 pu:2" --of xml` (hwloc 2.9)
exports, with Linux PU numbering (hyperthread siblings in the upper half);
the I/O part follows lstopo's export of real machines: host bridges
(bridge_type 0-1) below the package, PCIe root ports and switch ports
(1-1), PCI functions, and OS devices: verbs NICs (osdev_type 3) with their
netdev (2), CUDA GPUs (5, subtype CUDA) and NVML GPUs (1).

Machines (see test_topo_xml.c for every expected choice):
  dgx-h100.xml          2 sockets x 8 cores, 8 H100 + 8 ConnectX-7, GPU i and
                        mlx5_i behind one PCIe switch, one switch per host
                        bridge, 4 per socket; plus an Ethernet port (not a NIC
                        for ibcoll: no verbs device).
  two-nic-8gpu.xml      2 sockets x 4 cores, 8 A100 (no CUDA OS devices: PCI
                        bus order), 2 NICs: socket 0 has a two-level switch
                        tree (mlx5_0 beside GPU 0-1, GPU 2-3 one switch
                        over), socket 1 has GPU 4-7 behind two root ports and
                        mlx5_1 on a third root port of the same host bridge.
  one-socket-nogpu.xml  1 socket x 8 cores, no GPU, a dual-port card
                        (mlx5_0, mlx5_1) and a single-port card (mlx5_2) on
                        two host bridges.
  fake-2numa-2pu.xml    2 NUMA nodes of one PU each (PU 0, PU 1) with mlx5_0
                        near PU 0 and mlx5_1 near PU 1: lets a test bind a
                        thread for real (HWLOC_THISSYSTEM=1) on any machine
                        with CPUs 0 and 1.
"""
import os
import sys


class Gen:
    def __init__(self):
        self.gp = 0
        self.lines = []

    def gpi(self):
        self.gp += 1
        return self.gp

    def emit(self, depth, text):
        self.lines.append("  " * depth + text)


def mask(bits):
    """hwloc bitmap string: 32-bit words, most significant first."""
    v = 0
    for b in bits:
        v |= 1 << b
    words = []
    while True:
        words.append(v & 0xFFFFFFFF)
        v >>= 32
        if not v:
            break
    return ",".join("0x%08x" % w for w in reversed(words))


def sets(cpus, nodes):
    c, n = mask(cpus), mask(nodes)
    return ('cpuset="%s" complete_cpuset="%s" nodeset="%s" complete_nodeset="%s"'
            % (c, c, n, n))


def busid(bus, dev=0, fn=0):
    return "0000:%02x:%02x.%x" % (bus, dev, fn)


class Pci:
    """A PCI tree node: host bridge, PCI bridge, or function with OS devices."""

    def __init__(self, kind, **kw):
        self.kind = kind
        self.kw = kw
        self.children = []

    def add(self, child):
        self.children.append(child)
        return child


def host_bridge(first, last):
    return Pci("host", first=first, last=last)


def bridge(bus, dev, first, last, ids="[8086:352a] [0000:0000] 04"):
    return Pci("bridge", bus=bus, dev=dev, first=first, last=last, ids=ids)


def switch_port(bus, dev, first, last):
    return bridge(bus, dev, first, last, ids="[1000:c030] [1000:a064] b0")


def gpu(bus, model, pciid, cuda=None, nvml=None):
    f = Pci("dev", bus=bus, dev=0, fn=0, cls="0302", ids="[10de:%s] [10de:16c1] a1" % pciid,
            vendor="NVIDIA Corporation", device=model, speed="31.507692")
    if cuda is not None:
        f.add(Pci("osdev", name="cuda%d" % cuda, type=5, subtype="CUDA",
                  infos=[("Backend", "CUDA"), ("GPUVendor", "NVIDIA Corporation"),
                         ("GPUModel", model)]))
    if nvml is not None:
        f.add(Pci("osdev", name="nvml%d" % nvml, type=1,
                  infos=[("Backend", "NVML"), ("GPUVendor", "NVIDIA Corporation"),
                         ("GPUModel", model)]))
    return f


def nic(bus, ibdev, netdev, fn=0, model="MT2910 Family [ConnectX-7]"):
    f = Pci("dev", bus=bus, dev=0, fn=fn, cls="0207", ids="[15b3:1021] [15b3:0041] 00",
            vendor="Mellanox Technologies", device=model, speed="31.507692")
    f.add(Pci("osdev", name=netdev, type=2, infos=[("Address", "00:00:00:00:fe:80:00:00")]))
    f.add(Pci("osdev", name=ibdev, type=3,
              infos=[("NodeGUID", "a088:c203:00%02x:%02x%02x" % (bus, bus, fn)),
                     ("Port1State", "4"), ("Port1LID", "0x%x" % (bus + fn)),
                     ("Port1LMC", "0")]))
    return f


def ethernet(bus, dev, fn, netdev):
    f = Pci("dev", bus=bus, dev=dev, fn=fn, cls="0200", ids="[8086:1533] [8086:1533] 03",
            vendor="Intel Corporation", device="I210 Gigabit Network Connection",
            speed="0.250000")
    f.add(Pci("osdev", name=netdev, type=2, infos=[("Address", "3c:ec:ef:00:00:01")]))
    return f


def write_pci(g, node, depth, level):
    k = node.kw
    if node.kind == "host":
        g.emit(depth, '<object type="Bridge" gp_index="%d" bridge_type="0-1" depth="0" '
               'bridge_pci="0000:[%02x-%02x]">' % (g.gpi(), k["first"], k["last"]))
    elif node.kind == "bridge":
        g.emit(depth, '<object type="Bridge" gp_index="%d" bridge_type="1-1" depth="%d" '
               'bridge_pci="0000:[%02x-%02x]" pci_busid="%s" pci_type="0604 %s" '
               'pci_link_speed="31.507692">'
               % (g.gpi(), level, k["first"], k["last"], busid(k["bus"], k["dev"]), k["ids"]))
    elif node.kind == "dev":
        g.emit(depth, '<object type="PCIDev" gp_index="%d" pci_busid="%s" pci_type="%s %s" '
               'pci_link_speed="%s">'
               % (g.gpi(), busid(k["bus"], k["dev"], k["fn"]), k["cls"], k["ids"], k["speed"]))
        g.emit(depth + 1, '<info name="PCIVendor" value="%s"/>' % k["vendor"])
        g.emit(depth + 1, '<info name="PCIDevice" value="%s"/>' % k["device"])
    else:
        sub = ' subtype="%s"' % k["subtype"] if "subtype" in k else ""
        g.emit(depth, '<object type="OSDev" gp_index="%d" name="%s"%s osdev_type="%d">'
               % (g.gpi(), k["name"], sub, k["type"]))
        for name, value in k.get("infos", []):
            g.emit(depth + 1, '<info name="%s" value="%s"/>' % (name, value))
    for c in node.children:
        write_pci(g, c, depth + 1, level + 1)
    g.emit(depth, "</object>")


def machine(npkg, ncores, nthreads, io_per_pkg, product, pus=None):
    """Emit a whole topology. io_per_pkg[p] is the list of host bridges of package p."""
    g = Gen()
    total = npkg * ncores * nthreads

    def pu_index(p, c, h):
        if pus is not None:
            return pus[p][c][h]
        return h * npkg * ncores + p * ncores + c

    allcpus = [pu_index(p, c, h) for p in range(npkg) for c in range(ncores)
               for h in range(nthreads)]
    allnodes = list(range(npkg))
    g.emit(0, '<?xml version="1.0" encoding="UTF-8"?>')
    g.emit(0, '<!DOCTYPE topology SYSTEM "hwloc2.dtd">')
    g.emit(0, '<topology version="2.0">')
    a, n = mask(allcpus), mask(allnodes)
    g.emit(1, '<object type="Machine" os_index="0" cpuset="%s" complete_cpuset="%s" '
           'allowed_cpuset="%s" nodeset="%s" complete_nodeset="%s" allowed_nodeset="%s" '
           'gp_index="%d">' % (a, a, a, n, n, n, g.gpi()))
    g.emit(2, '<info name="DMIProductName" value="%s"/>' % product)
    g.emit(2, '<info name="Backend" value="Linux"/>')
    g.emit(2, '<info name="OSName" value="Linux"/>')
    g.emit(2, '<info name="Architecture" value="x86_64"/>')
    g.emit(2, '<info name="hwlocVersion" value="2.9.0"/>')
    g.emit(2, '<info name="ProcessName" value="gen_topo_xml.py"/>')
    for p in range(npkg):
        pcpus = [pu_index(p, c, h) for c in range(ncores) for h in range(nthreads)]
        g.emit(2, '<object type="Package" os_index="%d" %s gp_index="%d">'
               % (p, sets(pcpus, [p]), g.gpi()))
        g.emit(3, '<info name="CPUModel" value="Test CPU %d cores"/>' % ncores)
        g.emit(3, '<object type="NUMANode" os_index="%d" %s gp_index="%d" '
               'local_memory="%d">' % (p, sets(pcpus, [p]), g.gpi(), (1 << 30) * 64))
        g.emit(4, '<page_type size="4096" count="0"/>')
        g.emit(3, '</object>')
        for c in range(ncores):
            ccpus = [pu_index(p, c, h) for h in range(nthreads)]
            g.emit(3, '<object type="Core" os_index="%d" %s gp_index="%d">'
                   % (c, sets(ccpus, [p]), g.gpi()))
            for h in range(nthreads):
                i = pu_index(p, c, h)
                g.emit(4, '<object type="PU" os_index="%d" %s gp_index="%d"/>'
                       % (i, sets([i], [p]), g.gpi()))
            g.emit(3, '</object>')
        for hb in io_per_pkg[p]:
            write_pci(g, hb, 3, 0)
        g.emit(2, '</object>')
    g.emit(1, '</object>')
    g.emit(1, '<support name="discovery.pu"/>')
    g.emit(1, '<support name="discovery.numa"/>')
    g.emit(1, '<support name="discovery.numa_memory"/>')
    g.emit(0, '</topology>')
    assert len(allcpus) == total
    return "\n".join(g.lines) + "\n"


def dgx_h100():
    bases = [[0x18, 0x40, 0x4f, 0x5e], [0x9a, 0xc0, 0xce, 0xdc]]
    io = [[], []]
    for p in range(2):
        for k, b in enumerate(bases[p]):
            i = 4 * p + k
            hb = host_bridge(b, b + 7)
            rp = hb.add(bridge(b, 1, b + 1, b + 7))
            usp = rp.add(switch_port(b + 1, 0, b + 2, b + 7))
            usp.add(switch_port(b + 2, 0, b + 3, b + 3)).add(
                gpu(b + 3, "NVIDIA H100 80GB HBM3", "2330", cuda=i, nvml=i))
            usp.add(switch_port(b + 2, 1, b + 4, b + 4)).add(
                nic(b + 4, "mlx5_%d" % i, "ibp%ds0" % (b + 4)))
            io[p].append(hb)
    lan = host_bridge(0x00, 0x00)
    lan.add(ethernet(0x00, 0x1f, 6, "eno1"))
    io[0].insert(0, lan)
    return machine(2, 8, 2, io, "DGX H100 (ibcoll test)")


def two_nic_8gpu():
    a100 = ("NVIDIA A100-SXM4-80GB", "20b2")
    hb0 = host_bridge(0x10, 0x1f)
    l1 = hb0.add(bridge(0x10, 1, 0x11, 0x1f)).add(switch_port(0x11, 0, 0x12, 0x1f))
    l2a = l1.add(switch_port(0x12, 0, 0x13, 0x17)).add(switch_port(0x13, 0, 0x14, 0x17))
    l2a.add(switch_port(0x14, 0, 0x15, 0x15)).add(gpu(0x15, *a100))
    l2a.add(switch_port(0x14, 1, 0x16, 0x16)).add(gpu(0x16, *a100))
    l2a.add(switch_port(0x14, 2, 0x17, 0x17)).add(nic(0x17, "mlx5_0", "ibp23s0"))
    l2b = l1.add(switch_port(0x12, 1, 0x18, 0x1b)).add(switch_port(0x18, 0, 0x19, 0x1b))
    l2b.add(switch_port(0x19, 0, 0x1a, 0x1a)).add(gpu(0x1a, *a100))
    l2b.add(switch_port(0x19, 1, 0x1b, 0x1b)).add(gpu(0x1b, *a100))

    hb1 = host_bridge(0x80, 0x8f)
    s = hb1.add(bridge(0x80, 1, 0x81, 0x84)).add(switch_port(0x81, 0, 0x82, 0x84))
    s.add(switch_port(0x82, 0, 0x83, 0x83)).add(gpu(0x83, *a100))
    s.add(switch_port(0x82, 1, 0x84, 0x84)).add(gpu(0x84, *a100))
    s = hb1.add(bridge(0x80, 2, 0x85, 0x88)).add(switch_port(0x85, 0, 0x86, 0x88))
    s.add(switch_port(0x86, 0, 0x87, 0x87)).add(gpu(0x87, *a100))
    s.add(switch_port(0x86, 1, 0x88, 0x88)).add(gpu(0x88, *a100))
    hb1.add(bridge(0x80, 3, 0x89, 0x89)).add(nic(0x89, "mlx5_1", "ibp137s0"))
    return machine(2, 4, 2, [[hb0], [hb1]], "2-NIC 8-GPU node (ibcoll test)")


def one_socket_nogpu():
    hb0 = host_bridge(0x40, 0x41)
    rp = hb0.add(bridge(0x40, 1, 0x41, 0x41))
    rp.add(nic(0x41, "mlx5_0", "ens1f0np0", fn=0, model="MT2892 Family [ConnectX-6 Dx]"))
    rp.add(nic(0x41, "mlx5_1", "ens1f1np1", fn=1, model="MT2892 Family [ConnectX-6 Dx]"))
    hb1 = host_bridge(0xc0, 0xc1)
    hb1.add(bridge(0xc0, 1, 0xc1, 0xc1)).add(nic(0xc1, "mlx5_2", "ens2np0"))
    return machine(1, 8, 2, [[hb0, hb1]], "single-socket server (ibcoll test)")


def fake_2numa_2pu():
    hb0 = host_bridge(0x10, 0x11)
    hb0.add(bridge(0x10, 1, 0x11, 0x11)).add(nic(0x11, "mlx5_0", "ibp17s0"))
    hb1 = host_bridge(0x80, 0x81)
    hb1.add(bridge(0x80, 1, 0x81, 0x81)).add(nic(0x81, "mlx5_1", "ibp129s0"))
    return machine(2, 1, 1, [[hb0], [hb1]], "two PUs split in two NUMA nodes (ibcoll test)",
                   pus=[[[0]], [[1]]])


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else os.path.dirname(os.path.abspath(__file__))
    for name, fn in [("dgx-h100.xml", dgx_h100), ("two-nic-8gpu.xml", two_nic_8gpu),
                     ("one-socket-nogpu.xml", one_socket_nogpu),
                     ("fake-2numa-2pu.xml", fake_2numa_2pu)]:
        with open(os.path.join(out, name), "w") as f:
            f.write(fn())


if __name__ == "__main__":
    main()
