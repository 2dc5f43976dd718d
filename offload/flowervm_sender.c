/* The flower VM's packet sender (offload/flowervm.py builds it with `gcc -static`).
 *
 *   sender IFNAME FRAMES [COUNTDEV [CAPDEV...] | -- CMD ARG...]
 *
 * FRAMES holds frames as records: a 4-byte little-endian length, then that many bytes (the
 * whole Ethernet frame, FCS excluded). Each frame is written to IFNAME through an AF_PACKET
 * SOCK_RAW socket, exactly as given (the kernel adds nothing). After each frame the sender
 * prints "@pkt N SENT" (SENT: bytes written, or -errno) on stdout, then either
 *  - COUNTDEV: " REACHED" (how many frames COUNTDEV's ingress qdisc counted since the last
 *    frame: 1, or 0 when the stack dropped it before tc) and one line "C CHAIN PRIO HANDLE PACKETS" per action of every ingress filter of
 *    COUNTDEV, read with an RTM_GETTFILTER dump (what `tc -s filter show` reads, without a
 *    process per frame: under TCG a `tc` run costs a quarter of a second), or
 *    With CAPDEVs, then one line "O DEV HEX" per frame a CAPDEV sent since the last frame
 *    (the bytes the tc actions output: a mirred redirect or mirror out of that device, read
 *    by an AF_PACKET socket bound to it, outgoing frames only; a VLAN tag the kernel keeps
 *    as skb metadata (a vlan action, veth's tx-vlan offload) comes as PACKET_AUXDATA and is
 *    put back after the MACs, where the device sends it), or
 *  - CMD: runs it (fork + execvp, waited for), so what CMD prints belongs to frame N.
 * Exit 0 when every record was read (a frame the kernel refuses, such as a runt, is reported,
 * not fatal), 2 on bad usage or an unreadable file, 3 when the counters cannot be read.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <linux/if_ether.h>
#include <linux/if_packet.h>
#include <linux/netlink.h>
#include <linux/pkt_cls.h>
#include <linux/pkt_sched.h>
#include <linux/rtnetlink.h>
#include <linux/gen_stats.h>
#include <net/if.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

static int run(char **argv)
{
	pid_t pid = fork();
	int status = 0;

	if (pid < 0)
		return -1;
	if (pid == 0) {
		execvp(argv[0], argv);
		_exit(127);
	}
	if (waitpid(pid, &status, 0) < 0)
		return -1;
	return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

/* The nested attribute of type `type` inside [a, a + len), or NULL. */
static struct rtattr *attr(struct rtattr *a, int len, unsigned short type)
{
	for (; RTA_OK(a, len); a = RTA_NEXT(a, len))
		if ((a->rta_type & NLA_TYPE_MASK) == type)
			return a;
	return NULL;
}

/* One filter's actions: "C CHAIN PRIO HANDLE PACKETS" per action with basic stats. */
static void print_filter(struct nlmsghdr *h)
{
	struct tcmsg *t = NLMSG_DATA(h);
	int len = h->nlmsg_len - NLMSG_LENGTH(sizeof(*t));
	struct rtattr *a = (struct rtattr *)((char *)t + NLMSG_ALIGN(sizeof(*t)));
	struct rtattr *chain = attr(a, len, TCA_CHAIN), *opts = attr(a, len, TCA_OPTIONS), *acts, *act;
	unsigned int c = chain ? *(unsigned int *)RTA_DATA(chain) : 0;
	int alen;

	if (!opts || !(acts = attr(RTA_DATA(opts), RTA_PAYLOAD(opts), TCA_FLOWER_ACT)))
		return; /* the per-prio head entry has no options */
	alen = RTA_PAYLOAD(acts);
	for (act = RTA_DATA(acts); RTA_OK(act, alen); act = RTA_NEXT(act, alen)) {
		struct rtattr *st = attr(RTA_DATA(act), RTA_PAYLOAD(act), TCA_ACT_STATS), *basic;
		struct gnet_stats_basic b;

		if (!st || !(basic = attr(RTA_DATA(st), RTA_PAYLOAD(st), TCA_STATS_BASIC)))
			continue;
		memset(&b, 0, sizeof(b));
		memcpy(&b, RTA_DATA(basic), RTA_PAYLOAD(basic) < sizeof(b) ? RTA_PAYLOAD(basic) : sizeof(b));
		printf("C %u %u %u %u\n", c, TC_H_MAJ(t->tcm_info) >> 16, t->tcm_handle, b.packets);
	}
}

/* The packets counter of ifindex's ingress or clsact qdisc (RTM_NEWQDISC: TCA_STATS2 / BASIC). */
static long ingress_packets(struct nlmsghdr *h, int ifindex)
{
	struct tcmsg *t = NLMSG_DATA(h);
	int len = h->nlmsg_len - NLMSG_LENGTH(sizeof(*t));
	struct rtattr *a = (struct rtattr *)((char *)t + NLMSG_ALIGN(sizeof(*t)));
	struct rtattr *kind = attr(a, len, TCA_KIND), *st = attr(a, len, TCA_STATS2), *basic;
	struct gnet_stats_basic b;

	/* the scripts' qdisc is clsact (`qdisc replace ... clsact`); a plain ingress counts alike */
	if (t->tcm_ifindex != ifindex || !kind ||
	    (strcmp(RTA_DATA(kind), "ingress") && strcmp(RTA_DATA(kind), "clsact")) || !st ||
	    !(basic = attr(RTA_DATA(st), RTA_PAYLOAD(st), TCA_STATS_BASIC)))
		return -1;
	memset(&b, 0, sizeof(b));
	memcpy(&b, RTA_DATA(basic), RTA_PAYLOAD(basic) < sizeof(b) ? RTA_PAYLOAD(basic) : sizeof(b));
	return b.packets;
}

/* An RTM_GETTFILTER dump of every ingress filter of ifindex, all chains (no TCA_CHAIN in the
 * request), printed; or (qdisc) an RTM_GETQDISC dump, returning the ingress qdisc's packets. */
static long dump(int nl, int ifindex, int qdisc)
{
	static char buf[1 << 16];
	struct {
		struct nlmsghdr h;
		struct tcmsg t;
	} req;
	static unsigned int seq;
	long found = -1;

	memset(&req, 0, sizeof(req));
	req.h.nlmsg_len = sizeof(req);
	req.h.nlmsg_type = qdisc ? RTM_GETQDISC : RTM_GETTFILTER;
	req.h.nlmsg_flags = NLM_F_REQUEST | NLM_F_DUMP;
	req.h.nlmsg_seq = ++seq;
	req.t.tcm_family = AF_UNSPEC;
	req.t.tcm_ifindex = ifindex;
	req.t.tcm_parent = TC_H_MAKE(TC_H_CLSACT, TC_H_MIN_INGRESS);
	if (send(nl, &req, sizeof(req), 0) < 0)
		return -1;
	for (;;) {
		int n = recv(nl, buf, sizeof(buf), 0);
		struct nlmsghdr *h;

		if (n <= 0)
			return -1;
		for (h = (struct nlmsghdr *)buf; NLMSG_OK(h, n); h = NLMSG_NEXT(h, n)) {
			if (h->nlmsg_seq != seq)
				continue;
			if (h->nlmsg_type == NLMSG_DONE)
				return qdisc ? found : 0;
			if (h->nlmsg_type == NLMSG_ERROR)
				return -1;
			if (h->nlmsg_type == RTM_NEWTFILTER)
				print_filter(h);
			if (h->nlmsg_type == RTM_NEWQDISC && found < 0)
				found = ingress_packets(h, ifindex);
		}
	}
}

#define MAX_CAPTURE 8

struct capture {
	const char *name;
	int fd;
};

/* An AF_PACKET socket that sees every frame of ifname (ETH_P_ALL), with PACKET_AUXDATA. */
static int capture_open(const char *ifname)
{
	struct sockaddr_ll addr;
	int fd = socket(AF_PACKET, SOCK_RAW | SOCK_NONBLOCK, htons(ETH_P_ALL)), on = 1;

	if (fd < 0)
		return -1;
	memset(&addr, 0, sizeof(addr));
	addr.sll_family = AF_PACKET;
	addr.sll_protocol = htons(ETH_P_ALL);
	addr.sll_ifindex = (int)if_nametoindex(ifname);
	if (!addr.sll_ifindex || bind(fd, (struct sockaddr *)&addr, sizeof(addr)) ||
	    setsockopt(fd, SOL_PACKET, PACKET_AUXDATA, &on, sizeof(on))) {
		close(fd);
		return -1;
	}
	return fd;
}

/* Print "O DEV HEX" for each outgoing frame queued on the capture socket. */
static void capture_drain(const struct capture *c)
{
	static unsigned char buf[65536 + 4];
	union {
		struct cmsghdr h;
		char space[CMSG_SPACE(sizeof(struct tpacket_auxdata))];
	} control;

	for (;;) {
		struct sockaddr_ll from;
		struct iovec iov = {buf, sizeof(buf) - 4};
		struct msghdr msg = {&from, sizeof(from), &iov, 1, &control, sizeof(control), 0};
		struct cmsghdr *cm;
		ssize_t n = recvmsg(c->fd, &msg, MSG_TRUNC);

		if (n < 0)
			return;
		if (from.sll_pkttype != PACKET_OUTGOING || n > (ssize_t)sizeof(buf) - 4)
			continue;
		for (cm = CMSG_FIRSTHDR(&msg); cm; cm = CMSG_NXTHDR(&msg, cm)) {
			struct tpacket_auxdata aux;

			if (cm->cmsg_level != SOL_PACKET || cm->cmsg_type != PACKET_AUXDATA)
				continue;
			memcpy(&aux, CMSG_DATA(cm), sizeof(aux));
			if ((aux.tp_status & TP_STATUS_VLAN_VALID) && n >= 12) {
				unsigned short tpid = (aux.tp_status & TP_STATUS_VLAN_TPID_VALID) ? aux.tp_vlan_tpid
												   : ETH_P_8021Q;

				memmove(buf + 16, buf + 12, n - 12);
				buf[12] = tpid >> 8;
				buf[13] = tpid & 0xff;
				buf[14] = aux.tp_vlan_tci >> 8;
				buf[15] = aux.tp_vlan_tci & 0xff;
				n += 4;
			}
		}
		printf("O %s ", c->name);
		for (ssize_t i = 0; i < n; i++)
			printf("%02x", buf[i]);
		printf("\n");
	}
}

int main(int argc, char **argv)
{
	struct capture caps[MAX_CAPTURE];
	int ncaps = 0;
	static unsigned char frame[65536];
	struct sockaddr_ll addr;
	unsigned char hdr[4];
	unsigned int ifindex, countdev = 0;
	long n = 0, reached = 0;
	FILE *in;
	int fd, nl = -1;

	if (argc < 3 || (argc > 3 && strcmp(argv[3], "--") && argc > 4 + MAX_CAPTURE)) {
		fprintf(stderr, "usage: %s IFNAME FRAMES [COUNTDEV [CAPDEV...] | -- CMD ARG...]\n", argv[0]);
		return 2;
	}
	if (argc >= 4 && strcmp(argv[3], "--")) {
		countdev = if_nametoindex(argv[3]);
		nl = socket(AF_NETLINK, SOCK_RAW, NETLINK_ROUTE);
		if (!countdev || nl < 0) {
			fprintf(stderr, "sender: cannot read the counters of %s\n", argv[3]);
			return 2;
		}
		for (int i = 4; i < argc; i++) {
			caps[ncaps].name = argv[i];
			caps[ncaps].fd = capture_open(argv[i]);
			if (caps[ncaps++].fd < 0) {
				fprintf(stderr, "sender: cannot capture on %s: %s\n", argv[i], strerror(errno));
				return 2;
			}
		}
	}
	ifindex = if_nametoindex(argv[1]);
	if (!ifindex) {
		fprintf(stderr, "sender: no interface %s\n", argv[1]);
		return 2;
	}
	in = fopen(argv[2], "rb");
	if (!in) {
		fprintf(stderr, "sender: cannot open %s: %s\n", argv[2], strerror(errno));
		return 2;
	}
	fd = socket(AF_PACKET, SOCK_RAW, 0); /* protocol 0: send only, receive nothing */
	if (fd < 0) {
		fprintf(stderr, "sender: socket: %s\n", strerror(errno));
		return 2;
	}
	memset(&addr, 0, sizeof(addr));
	addr.sll_family = AF_PACKET;
	addr.sll_ifindex = (int)ifindex;
	addr.sll_halen = ETH_ALEN;
	if (countdev) { /* frames sent earlier (a VM session reuses its devices) are not ours */
		reached = dump(nl, (int)countdev, 1);
		if (reached < 0) {
			fprintf(stderr, "sender: no ingress qdisc on %s\n", argv[3]);
			return 3;
		}
	}
	while (fread(hdr, 1, 4, in) == 4) {
		uint32_t len = hdr[0] | hdr[1] << 8 | hdr[2] << 16 | (uint32_t)hdr[3] << 24;
		ssize_t sent;

		if (len > sizeof(frame) || fread(frame, 1, len, in) != len) {
			fprintf(stderr, "sender: %s: record %ld is truncated\n", argv[2], n);
			return 2;
		}
		sent = sendto(fd, frame, len, 0, (struct sockaddr *)&addr, sizeof(addr));
		if (sent < 0)
			sent = -errno;
		if (countdev) {
			/* veth hands the frame to the backlog: wait (up to 0.2 s) until the ingress
			 * qdisc has counted it, so the filter counters read next include it. With one
			 * CPU, classification ends before this process runs again. A frame the stack
			 * drops before tc (a VLAN tag cut short) never gets there: REACHED 0. */
			long delta = 0;
			int tries;

			for (tries = 0; tries < 200; tries++) {
				long got = dump(nl, (int)countdev, 1);

				if (got < 0) {
					fprintf(stderr, "sender: no ingress qdisc on %s\n", argv[3]);
					return 3;
				}
				if (got > reached) {
					delta = got - reached;
					reached = got;
					break;
				}
				if (sent < 0)
					break;
				usleep(1000);
			}
			printf("@pkt %ld %zd %ld\n", n, sent, delta);
		} else {
			printf("@pkt %ld %zd\n", n, sent);
		}
		if (countdev && dump(nl, (int)countdev, 0)) {
			fprintf(stderr, "sender: RTM_GETTFILTER dump of %s failed: %s\n", argv[3], strerror(errno));
			return 3;
		}
		/* the actions ran in the softirq that counted the frame (one CPU): what they sent
		 * is queued on the capture sockets already */
		for (int i = 0; i < ncaps; i++)
			capture_drain(&caps[i]);
		fflush(stdout);
		if (!countdev && argc > 4)
			run(argv + 4);
		n++;
	}
	fclose(in);
	close(fd);
	return 0;
}
