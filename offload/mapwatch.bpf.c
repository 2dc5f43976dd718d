// SPDX-License-Identifier: GPL-2.0
/* xdp2tc sync's map-change watcher (offload/mapwatch.py loads it; built by `make watcher`).
 *
 * On the bpf() syscall tracepoints: at entry, for the commands that change a map's
 * elements, resolve the caller's map fd to the kernel map (current task's fd table ->
 * struct file -> private_data, the struct bpf_map; CO-RE relocated against the running
 * kernel's BTF) and, when its id is in `watched`, remember the map id, command, key and
 * entry time per thread. At exit, report it over the `events` ring buffer when the
 * command succeeded (batch commands and deletes whatever they returned: a partial batch
 * may still have changed the map). Deletes, and updates of maps whose values are at most
 * VALUE_MAX bytes (not per-CPU), are also reported at entry, with the new value, before the
 * kernel writes: sync takes the drops the change makes wrong away without waiting. The fd is resolved in the kernel, in the caller's context,
 * because a short-lived writer (`bpftool map update`) is gone before user space could look
 * its fd up in /proc.
 */
#include <linux/types.h>
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_core_read.h>

#define KEY_MAX 64
#define VALUE_MAX 64

/* Only the fields read here; `___xdp2tc` is stripped by libbpf when matching kernel types. */
struct bpf_map___xdp2tc {
	enum bpf_map_type map_type;
	__u32 key_size;
	__u32 value_size;
	__u32 id;
} __attribute__((preserve_access_index));
struct file___xdp2tc {
	void *private_data;
} __attribute__((preserve_access_index));
struct fdtable___xdp2tc {
	unsigned int max_fds;
	struct file___xdp2tc **fd;
} __attribute__((preserve_access_index));
struct files_struct___xdp2tc {
	struct fdtable___xdp2tc *fdt;
} __attribute__((preserve_access_index));
struct task_struct___xdp2tc {
	struct files_struct___xdp2tc *files;
} __attribute__((preserve_access_index));

/* /sys/kernel/tracing/events/syscalls/sys_{enter,exit}_bpf/format */
struct enter_ctx {
	__u64 common;
	__s32 syscall_nr;
	__u32 pad;
	__u64 cmd;
	__u64 uattr;
	__u64 size;
};
struct exit_ctx {
	__u64 common;
	__s32 syscall_nr;
	__u32 pad;
	__s64 ret;
};

/* One change; key_size 0: the key is unknown (a batch command or a key longer than
 * KEY_MAX) and the map must be re-read. Layout mirrored in offload/mapwatch.py. */
struct event {
	__u64 enter_ns; /* bpf_ktime_get_ns() at syscall entry (CLOCK_MONOTONIC) */
	__u32 map_id;
	__u32 cmd;
	__u32 key_size;
	__s32 ret;
	__u32 early; /* 1: reported at its syscall's entry, before it takes effect */
	__u32 pad;
	__u8 key[KEY_MAX];
	__u32 value_size; /* an early update's new value (0: not known) */
	__u32 pad2;
	__u8 value[VALUE_MAX];
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 256);
	__type(key, __u32);
	__type(value, __u8);
} watched SEC(".maps");

/* per thread between entry and exit; LRU so threads killed inside bpf() never fill it */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 4096);
	__type(key, __u64);
	__type(value, struct event);
} pending SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 1 << 22);
} events SEC(".maps");

static __always_inline int is_batch(__u32 cmd)
{
	return cmd == BPF_MAP_UPDATE_BATCH || cmd == BPF_MAP_DELETE_BATCH || cmd == BPF_MAP_LOOKUP_AND_DELETE_BATCH;
}

SEC("tracepoint/syscalls/sys_enter_bpf")
int xdp2tc_map_enter(struct enter_ctx *ctx)
{
	__u32 cmd = ctx->cmd;
	__u32 fd;
	__u64 keyp = 0, valuep = 0;

	if (cmd == BPF_MAP_UPDATE_ELEM || cmd == BPF_MAP_DELETE_ELEM || cmd == BPF_MAP_LOOKUP_AND_DELETE_ELEM) {
		struct {
			__u32 map_fd;
			__u32 pad;
			__u64 key;
			__u64 value;
		} attr;
		if (bpf_probe_read_user(&attr, sizeof(attr), (void *)ctx->uattr))
			return 0;
		fd = attr.map_fd;
		keyp = attr.key;
		valuep = cmd == BPF_MAP_UPDATE_ELEM ? attr.value : 0;
	} else if (is_batch(cmd)) {
		/* union bpf_attr.batch: in_batch, out_batch, keys, values, count, map_fd */
		if (bpf_probe_read_user(&fd, sizeof(fd), (void *)(ctx->uattr + 36)))
			return 0;
	} else {
		return 0;
	}

	struct task_struct___xdp2tc *task = (void *)bpf_get_current_task();
	struct fdtable___xdp2tc *fdt = BPF_CORE_READ(task, files, fdt);
	if (!fdt || fd >= BPF_CORE_READ(fdt, max_fds))
		return 0;
	struct file___xdp2tc **fds = BPF_CORE_READ(fdt, fd);
	struct file___xdp2tc *file = 0;
	if (bpf_probe_read_kernel(&file, sizeof(file), &fds[fd]) || !file)
		return 0;
	struct bpf_map___xdp2tc *map = BPF_CORE_READ(file, private_data);
	if (!map)
		return 0;
	__u32 id = BPF_CORE_READ(map, id);
	if (!bpf_map_lookup_elem(&watched, &id))
		return 0;

	struct event ev = {};
	ev.enter_ns = bpf_ktime_get_ns();
	ev.map_id = id;
	ev.cmd = cmd;
	__u32 ks = BPF_CORE_READ(map, key_size);
	if (keyp && ks > 0 && ks <= KEY_MAX) {
		/* (ks - 1) & (KEY_MAX - 1) is ks - 1 here, and a bound the verifier can see */
		__u32 n = ((ks - 1) & (KEY_MAX - 1)) + 1;
		if (bpf_probe_read_user(ev.key, n, (void *)keyp) == 0)
			ev.key_size = n;
	}
	__u32 vs = BPF_CORE_READ(map, value_size);
	__u32 type = BPF_CORE_READ(map, map_type);
	int percpu = type == BPF_MAP_TYPE_PERCPU_HASH || type == BPF_MAP_TYPE_PERCPU_ARRAY ||
		     type == BPF_MAP_TYPE_LRU_PERCPU_HASH;
	if (valuep && !percpu && vs > 0 && vs <= VALUE_MAX) {
		__u32 n = ((vs - 1) & (VALUE_MAX - 1)) + 1;
		if (bpf_probe_read_user(ev.value, n, (void *)valuep) == 0)
			ev.value_size = n;
	}
	/* A delete, or an update whose new value was read: reported now, while the kernel is
	 * still writing, so sync can take away the drops the change makes wrong. */
	if (ev.key_size && (ev.value_size || cmd == BPF_MAP_DELETE_ELEM || cmd == BPF_MAP_LOOKUP_AND_DELETE_ELEM)) {
		ev.early = 1;
		bpf_ringbuf_output(&events, &ev, sizeof(ev), 0);
	}
	__u64 tid = bpf_get_current_pid_tgid();
	bpf_map_update_elem(&pending, &tid, &ev, BPF_ANY);
	return 0;
}

SEC("tracepoint/syscalls/sys_exit_bpf")
int xdp2tc_map_exit(struct exit_ctx *ctx)
{
	__u64 tid = bpf_get_current_pid_tgid();
	struct event *ev = bpf_map_lookup_elem(&pending, &tid);

	if (!ev)
		return 0;
	ev->ret = ctx->ret;
	/* after an early event, whatever the command returned: the early event may have
	 * removed filters that a failed command leaves valid, and sync re-reads the entry */
	if (ctx->ret == 0 || is_batch(ev->cmd) || ev->early) {
		ev->early = 0;
		ev->value_size = 0;
		bpf_ringbuf_output(&events, ev, sizeof(*ev), 0);
	}
	bpf_map_delete_elem(&pending, &tid);
	return 0;
}

char LICENSE[] SEC("license") = "GPL";
