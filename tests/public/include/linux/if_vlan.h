/* xdp2tc shim (not from upstream): the kernel tree's include/linux/if_vlan.h gives the
 * samples `struct vlan_hdr`; the installed UAPI header does not. Only with
 * -DXDP2TC_KERNEL_VLAN_HDR (Suricata's sources define their own). */
#include_next <linux/if_vlan.h>
#ifdef XDP2TC_KERNEL_VLAN_HDR
struct vlan_hdr {
	__be16 h_vlan_TCI;
	__be16 h_vlan_encapsulated_proto;
};
#endif
