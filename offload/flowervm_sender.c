/* The flower VM's packet sender (offload/flowervm.py builds it with `gcc -static`).
 *
 *   sender IFNAME FRAMES [CMD ARG...]
 *
 * FRAMES holds frames as records: a 4-byte little-endian length, then that many bytes (the
 * whole Ethernet frame, FCS excluded). Each frame is written to IFNAME through an AF_PACKET
 * SOCK_RAW socket, exactly as given (the kernel adds nothing). After each frame, when CMD is
 * given, the sender prints "@pkt N SENT" (SENT: bytes written, or -errno) on stdout and runs
 * CMD (fork + execvp, waited for), so what CMD prints belongs to frame N. Exit 0 when every
 * record was read (a frame the kernel refuses, such as a runt, is reported, not fatal), 2 on
 * bad usage or an unreadable file.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <linux/if_ether.h>
#include <linux/if_packet.h>
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

int main(int argc, char **argv)
{
	static unsigned char frame[65536];
	struct sockaddr_ll addr;
	unsigned char hdr[4];
	unsigned int ifindex;
	long n = 0;
	FILE *in;
	int fd;

	if (argc < 3) {
		fprintf(stderr, "usage: %s IFNAME FRAMES [CMD ARG...]\n", argv[0]);
		return 2;
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
		if (argc > 3) {
			printf("@pkt %ld %zd\n", n, sent);
			fflush(stdout);
			run(argv + 3);
		}
		n++;
	}
	fclose(in);
	close(fd);
	return 0;
}
