/* xdp2tc shim (not from upstream): <linux/icmp.h> pulls in glibc's <sys/socket.h> through
 * <linux/if.h>; under -target bpf glibc's wordsize is 32 and it asks for the i386 stubs,
 * which an amd64 system lacks. They only list unimplemented functions: nothing is needed. */
