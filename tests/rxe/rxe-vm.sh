#!/bin/bash
# SPDX-License-Identifier: MIT
# rxe-vm.sh - run a command inside a throw-away qemu VM with Soft-RoCE
# (rdma_rxe) devices, so ibcoll's verbs code runs on real verbs on machines
# without RDMA hardware or InfiniBand support in their kernel. The VM boots
# Debian's own kernel (package linux-image-amd64) under TCG emulation (KVM
# is not needed), sees the host root read-only over 9p under a tmpfs
# overlay, and the current directory read-write at the same path.
#
# usage: tests/rxe/rxe-vm.sh [--check] [--] COMMAND [ARGS...]
#   --check   only test the prerequisites: exit 0, or 77 with the reason
#
# Exit status: the command's; 77 when a prerequisite is missing (qemu, the
# kernel and its modules, busybox-static, cpio: scripts/install-deps.sh
# --vm installs them); 124 when the VM timed out; 125 when it died before
# the command finished (console tail printed); 120-123 when the guest's
# rxe set-up failed (its log printed).
#
# Inside the guest (root, PATH, HOME=/root, LANG=C.UTF-8, no stdin):
#   rxe0 on veth0 (GIDs: 0 IPv6 link-local, 1 ::ffff:192.0.2.1), rxe1 on
#   veth1 (GID 0 link-local only), veth0 and veth1 being one veth pair;
#   RXE_DEV0=rxe0 RXE_DEV1=rxe1 RXE_IPV4=192.0.2.1 in the environment.
#   Out-of-band TCP between processes uses 127.0.0.1.
#
# Environment:
#   RXEVM_TIMEOUT   seconds before the VM is killed (default 600)
#   RXEVM_MEM       guest memory, MiB (default 2048)
#   RXEVM_SMP       guest vCPUs (default: host CPUs, at most 4)
#   RXEVM_ACCEL     tcg (default) or kvm
#   RXEVM_KERNEL    kernel image (default: newest /boot/vmlinuz-*-amd64)
#   RXEVM_CACHE     initramfs and vmlinux cache (default ~/.cache/ibcoll-rxevm)
#   RXEVM_PASSENV   names of host environment variables to pass in
#   RXEVM_CONSOLE=1 print the guest console at the end
#   RXEVM_SOCKET    listen:PORT or connect:PORT: add eth0, a virtio NIC on a
#                   qemu socket netdev on 127.0.0.1:PORT (two VMs on one
#                   host), with rxe_eth on it; RXEVM_ETH_ADDR gives eth0's
#                   IPv4/prefix (not in 192.0.2.0/24, which is veth0's)
# Recipe: see the project's docs and ../shared/docs/soft-roce-vm.md, where it
# was worked out (module autoload through chroot, PVH boot, FIFOs for I/O).
set -u

skip() { echo "rxe-vm: SKIP: $*" >&2; exit 77; }
die() { echo "rxe-vm: $*" >&2; exit 125; }

check_only=0
while [ $# -gt 0 ]; do
	case "$1" in
	--check) check_only=1; shift ;;
	--) shift; break ;;
	-h|--help) sed -n '3,42p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
	*) break ;;
	esac
done

# ---- prerequisites (a missing one is a SKIP, never a pass) ----------------
command -v qemu-system-x86_64 >/dev/null 2>&1 ||
	skip "qemu-system-x86_64 not found (scripts/install-deps.sh --vm installs qemu-system-x86)"
KERNEL=${RXEVM_KERNEL:-$(ls -1 /boot/vmlinuz-*-amd64 2>/dev/null | sort -V | tail -1)}
[ -n "$KERNEL" ] && [ -r "$KERNEL" ] ||
	skip "no readable /boot/vmlinuz-*-amd64 (scripts/install-deps.sh --vm installs linux-image-amd64)"
KVER=${KERNEL##*/vmlinuz-}
[ -d "/lib/modules/$KVER/kernel/drivers/infiniband/sw/rxe" ] ||
	skip "no rdma_rxe module for kernel $KVER in /lib/modules (install linux-image-$KVER)"
BUSYBOX=
for b in /bin/busybox /usr/bin/busybox "$(command -v busybox 2>/dev/null)"; do
	[ -n "$b" ] && [ -x "$b" ] && file -L "$b" 2>/dev/null | grep -q 'statically linked' && { BUSYBOX=$b; break; }
done
[ -n "$BUSYBOX" ] || skip "no statically linked busybox (install busybox-static)"
command -v cpio >/dev/null 2>&1 || skip "cpio not found"
command -v modprobe >/dev/null 2>&1 || skip "modprobe not found (install kmod)"
[ $check_only = 1 ] && exit 0
[ $# -ge 1 ] || { echo "usage: $0 [--check] [--] COMMAND [ARGS...]" >&2; exit 2; }

TIMEOUT=${RXEVM_TIMEOUT:-600}
MEM=${RXEVM_MEM:-2048}
NCPU=$(nproc 2>/dev/null || echo 1)
[ "$NCPU" -gt 4 ] && NCPU=4
SMP=${RXEVM_SMP:-$NCPU}
ACCEL=${RXEVM_ACCEL:-tcg}
CACHE=${RXEVM_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/ibcoll-rxevm}
mkdir -p "$CACHE" || die "cannot create $CACHE"

# ---- initramfs: busybox, the 9p/overlay/virtio modules, our /init ----------
INITSUM=$(sed -n '/^# ==== guest init ====$/,/^# ==== end guest init ====$/p' "$0" | md5sum | cut -c1-8)
INITRD="$CACHE/initramfs-$KVER-$INITSUM.cpio.gz"
build_initramfs() {
	local d f m
	d=$(mktemp -d "$CACHE/build.XXXXXX") || die "mktemp failed"
	mkdir -p "$d/bin" "$d/dev" "$d/proc" "$d/sys" "$d/mnt/lower" "$d/mnt/rw" "$d/mnt/ctl" \
		"$d/newroot" "$d/mods"
	cp "$BUSYBOX" "$d/bin/busybox"
	for m in virtio_pci 9pnet_virtio 9p overlay virtio_console; do
		modprobe -S "$KVER" --show-depends "$m" || die "modprobe --show-depends $m failed"
	done | awk '$1 == "insmod" && !seen[$2]++ {print $2}' > "$d/modlist"
	while read -r f; do
		case "$f" in
		*.ko) cp "$f" "$d/mods/" ;;
		*.ko.xz) xz -dc "$f" > "$d/mods/$(basename "$f" .xz)" ;;
		*.ko.zst) zstd -qdc "$f" > "$d/mods/$(basename "$f" .zst)" ;;
		esac
		basename "${f%.ko*}"
	done < "$d/modlist" > "$d/mods/order"
	rm -f "$d/modlist"
	sed -n '/^# ==== guest init ====$/,/^# ==== end guest init ====$/p' "$0" | sed '1d;$d' > "$d/init"
	# request_module() runs its helper relative to the initramfs root: chroot it
	printf '#!/bin/sh\nexec /bin/chroot /newroot /sbin/modprobe "$@"\n' > "$d/bin/modprobe-chroot"
	chmod +x "$d/init" "$d/bin/modprobe-chroot"
	(cd "$d" && find . -print0 | cpio --null -o -H newc 2>/dev/null | gzip -1) > "$INITRD.tmp.$$" &&
		mv "$INITRD.tmp.$$" "$INITRD" || die "initramfs build failed"
	rm -rf "$d"
}
[ -s "$INITRD" ] || build_initramfs

# Under TCG the kernel's xz decompressor costs seconds per boot: boot the
# uncompressed vmlinux through its PVH entry point when it can be extracted.
BOOTIMG=$KERNEL
VMLINUX="$CACHE/vmlinux-$KVER"
if [ "${RXEVM_PVH:-1}" = 1 ] && command -v xz >/dev/null 2>&1; then
	if [ ! -s "$VMLINUX" ]; then
		off=$(LC_ALL=C grep -obUaP '\xfd7zXZ\x00' "$KERNEL" 2>/dev/null | head -1 | cut -d: -f1)
		if [ -n "$off" ]; then
			tail -c +$((off + 1)) "$KERNEL" | xz -dcq > "$VMLINUX.tmp.$$" 2>/dev/null
			if head -c 4 "$VMLINUX.tmp.$$" | grep -q ELF; then
				mv "$VMLINUX.tmp.$$" "$VMLINUX"
			else
				rm -f "$VMLINUX.tmp.$$"
			fi
		fi
	fi
	[ -s "$VMLINUX" ] && BOOTIMG=$VMLINUX
fi

# ---- the guest's second stage: rxe set-up, then the command -----------------
CWD=$(pwd -P)
CTL=$(mktemp -d "${TMPDIR:-/tmp}/ibcoll-rxevm.XXXXXX") || die "mktemp failed"
catout=
caterr=
cleanup() {
	[ -n "$catout" ] && kill "$catout" 2>/dev/null
	[ -n "$caterr" ] && kill "$caterr" 2>/dev/null
	rm -rf "$CTL"
}
trap cleanup EXIT
printf '%s\n' "$CWD" > "$CTL/cwd"
{
	echo 'export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin'
	echo 'export HOME=/root TERM=dumb LANG=C.UTF-8'
	for v in ${RXEVM_PASSENV:-}; do
		[ -n "${!v+x}" ] && printf 'export %s=%q\n' "$v" "${!v}"
	done
	cat <<'EOF'
exec 3>&1 4>&2 >/run/rxevm-ctl/setup.log 2>&1
set -x
modprobe rdma_rxe && modprobe rdma_ucm && modprobe veth || exit 120
ip link set lo up
ip link add veth0 type veth peer name veth1 && ip link set veth0 up && ip link set veth1 up || exit 121
ip addr add 192.0.2.1/24 dev veth0
rdma link add rxe0 type rxe netdev veth0 || exit 122
rdma link add rxe1 type rxe netdev veth1 || exit 122
EOF
	if [ -n "${RXEVM_SOCKET:-}" ]; then
		echo 'modprobe virtio_net; for i in $(seq 50); do [ -e /sys/class/net/eth0 ] && break; sleep 0.1; done'
		echo 'ip link set eth0 up || exit 123'
		[ -n "${RXEVM_ETH_ADDR:-}" ] && printf 'ip addr add %q dev eth0 || exit 123\n' "$RXEVM_ETH_ADDR"
		echo 'rdma link add rxe_eth type rxe netdev eth0 || exit 123'
	fi
	cat <<'EOF'
rdma link show
# the IPv6 link-local GIDs appear after duplicate address detection: wait (<= 5 s)
for i in $(seq 50); do
	ok=1
	for d in /sys/class/infiniband/*; do
		grep -q '^fe80' "$d/ports/1/gids/0" 2>/dev/null || ok=0
	done
	[ $ok = 1 ] && break
	sleep 0.1
done
grep -H . /sys/class/infiniband/*/ports/1/gids/[0-3] 2>/dev/null | grep -v ':0000:0000:0000:0000:0000:0000:0000:0000$'
set +x
exec 1>&3 2>&4 3>&- 4>&-
export RXE_DEV0=rxe0 RXE_DEV1=rxe1 RXE_IPV4=192.0.2.1
EOF
	printf 'cd %q || exit 126\n' "$CWD"
	printf 'exec'
	printf ' %q' "$@"
	printf '\n'
} > "$CTL/stage2.sh"

NET=(-nic none)
if [ -n "${RXEVM_SOCKET:-}" ]; then
	case "$RXEVM_SOCKET" in
	listen:*) sock="listen=127.0.0.1:${RXEVM_SOCKET#listen:}" ;;
	connect:*) sock="connect=127.0.0.1:${RXEVM_SOCKET#connect:}" ;;
	*) die "RXEVM_SOCKET must be listen:PORT or connect:PORT" ;;
	esac
	mac=52:54:00:$(od -An -N3 -tx1 /dev/urandom | tr -d ' \n' | sed 's/../&:/g;s/:$//')
	NET=(-netdev "socket,id=n0,$sock" -device "virtio-net-pci,netdev=n0,mac=$mac")
fi
ACCEL_ARGS=(-accel tcg -cpu max)
[ "$ACCEL" = kvm ] && ACCEL_ARGS=(-accel kvm -cpu host)
esc() { printf '%s' "$1" | sed 's/,/,,/g'; } # qemu option values: ',' doubles

# The guest's stdout and stderr come back through FIFOs read by cat processes
# that inherit ours (a -chardev file on /dev/fd/1 would reopen it with its own
# offset and overwrite the caller's output when that is a regular file).
mkfifo "$CTL/out" "$CTL/err" || die "mkfifo failed"
cat "$CTL/out" &
catout=$!
cat "$CTL/err" >&2 &
caterr=$!
timeout --foreground -k 10 "$TIMEOUT" qemu-system-x86_64 \
	"${ACCEL_ARGS[@]}" -smp "$SMP" -m "$MEM" -machine pc -nodefaults -display none -no-reboot \
	-kernel "$BOOTIMG" -initrd "$INITRD" \
	-append "console=ttyS0 loglevel=4 panic=-1 mitigations=off" \
	-serial "file:$CTL/console.log" -monitor none \
	-virtfs "local,path=/,mount_tag=hostroot,security_model=none,readonly=on,multidevs=remap" \
	-virtfs "local,path=$(esc "$CTL"),mount_tag=ctl,security_model=none" \
	-virtfs "local,path=$(esc "$CWD"),mount_tag=cwd,security_model=none,multidevs=remap" \
	"${NET[@]}" \
	-device virtio-serial-pci \
	-chardev "file,id=out,path=$(esc "$CTL/out")" -device virtserialport,chardev=out,name=stdout \
	-chardev "file,id=err,path=$(esc "$CTL/err")" -device virtserialport,chardev=err,name=stderr
qrc=$?
# if qemu died before opening the FIFOs, unblock the readers
exec 5<>"$CTL/out" 6<>"$CTL/err"
exec 5>&- 6>&-
wait "$catout" "$caterr" 2>/dev/null
catout=
caterr=

[ "${RXEVM_CONSOLE:-0}" = 1 ] && cat "$CTL/console.log" >&2
if [ $qrc -eq 124 ] || [ $qrc -eq 137 ]; then
	echo "rxe-vm: VM timed out after ${TIMEOUT} s; console tail:" >&2
	tail -n 20 "$CTL/console.log" >&2 2>/dev/null
	exit 124
fi
if [ ! -s "$CTL/rc" ]; then
	echo "rxe-vm: VM ended without a result (qemu exit status $qrc); console tail:" >&2
	cat "$CTL/init-error" >&2 2>/dev/null
	tail -n 30 "$CTL/console.log" >&2 2>/dev/null
	exit 125
fi
rc=$(cat "$CTL/rc")
if [ "$rc" -ge 120 ] && [ "$rc" -le 123 ] && ! grep -q '^+ set +x' "$CTL/setup.log" 2>/dev/null; then
	echo "rxe-vm: the guest's rxe set-up failed (status $rc):" >&2
	cat "$CTL/setup.log" >&2
fi
exit "$rc"

# ==== guest init ====
#!/bin/busybox sh
# PID 1 of the VM: mount the host root (9p, read-only) under a tmpfs overlay
# and the working directory (9p, read-write) at its host path, chroot into it
# to run stage2.sh, store its exit status, power off.
/bin/busybox --install -s /bin
export PATH=/bin
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev
off() { sync; echo o > /proc/sysrq-trigger; sleep 30; }
die() { echo "rxevm-init: $*" > /dev/ttyS0; echo "init: $*" >> /mnt/ctl/init-error 2>/dev/null; off; }
for m in $(cat /mods/order); do
	insmod /mods/$m.ko || echo "rxevm-init: insmod $m failed" > /dev/ttyS0
done
P9="trans=virtio,version=9p2000.L,msize=262144"
mount -t 9p -o $P9,cache=none ctl /mnt/ctl || die "mount ctl failed"
mount -t 9p -o $P9,ro,cache=loose hostroot /mnt/lower || die "mount hostroot failed"
mount -t tmpfs -o mode=755 tmpfs /mnt/rw
mkdir -p /mnt/rw/upper /mnt/rw/work
if ! mount -t overlay overlay -o lowerdir=/mnt/lower,upperdir=/mnt/rw/upper,workdir=/mnt/rw/work /newroot; then
	echo "rxevm-init: overlay failed, read-only root with tmpfs dirs" > /dev/ttyS0
	mount --bind /mnt/lower /newroot
	for d in /tmp /var/tmp /root; do mount -t tmpfs tmpfs /newroot$d; done
fi
mount -t proc proc /newroot/proc
mount -t sysfs sysfs /newroot/sys
mount -t devtmpfs devtmpfs /newroot/dev
mkdir -p /newroot/dev/pts /newroot/dev/shm
mount -t devpts devpts /newroot/dev/pts
mount -t tmpfs tmpfs /newroot/dev/shm
mount -t tmpfs tmpfs /newroot/run
mkdir -p /newroot/run/rxevm-ctl
mount --bind /mnt/ctl /newroot/run/rxevm-ctl
echo /bin/modprobe-chroot > /proc/sys/kernel/modprobe
CWD=$(cat /mnt/ctl/cwd)
if [ -n "$CWD" ] && [ "$CWD" != / ]; then
	mkdir -p "/newroot$CWD" 2>/dev/null
	mount -t 9p -o $P9,cache=mmap cwd "/newroot$CWD" || die "mount cwd failed"
fi
OUT=/dev/ttyS0
ERR=/dev/ttyS0
for p in /sys/class/virtio-ports/*; do
	[ -e "$p/name" ] || continue
	case "$(cat $p/name)" in
	stdout) OUT=/dev/${p##*/} ;;
	stderr) ERR=/dev/${p##*/} ;;
	esac
done
chroot /newroot /bin/bash /run/rxevm-ctl/stage2.sh < /dev/null > $OUT 2> $ERR
echo $? > /mnt/ctl/rc
umount "/newroot$CWD" 2>/dev/null
off
# ==== end guest init ====
