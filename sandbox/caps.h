/* A process's own capability sets, as 64-bit masks: what the containment sequence (contain.c)
 * and an exec's change of user (agent_user.c) read and set. Each function is one kind of system
 * call, named below, so that the calls init makes under a bundle's seccomp filter stay those
 * contain_calls.c lists. */
#ifndef NSBOX_CAPS_H
#define NSBOX_CAPS_H

#include <stdint.h>

/* The highest capability this kernel knows (prctl PR_CAPBSET_READ, one a capability). */
int nsbox_caps_last(void);

/* Every capability up to last (nsbox_caps_last): a mask that leaves out what the kernel does
 * not know, which capset would refuse. */
uint64_t nsbox_caps_known(int last);

/* The calling thread's effective, permitted and inheritable sets (capget). 0, or -1 with
 * errno. */
int nsbox_caps_get(uint64_t *eff, uint64_t *prm, uint64_t *inh);

/* 1 when the calling thread has capability cap in its effective set, 0 when not, -1 when its
 * sets cannot be read (errno). */
int nsbox_caps_effective_has(int cap);

/* The calling thread's effective, permitted and inheritable sets made these (one capset). 0,
 * or -1 with errno. */
int nsbox_caps_set(uint64_t eff, uint64_t prm, uint64_t inh);

#endif
