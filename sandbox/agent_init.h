/* init's end of the agent protocol (agent.h): in a persistent sandbox and in nsbox-oci's
 * container, pid 1 serves the supervisor's (or the monitor's) requests and a pooled sandbox's
 * run socket, starts the commands (agent_exec.h) and reports their ends. */
#ifndef NSBOX_AGENT_INIT_H
#define NSBOX_AGENT_INIT_H

#include <stdint.h>
#include <sys/types.h>

/* The WORKSPACE message (nsbox_agent_recv_workspace). Sent before init closes the
 * report pipe, so that the supervisor, woken by that pipe's end, finds it already queued and
 * does not sleep a second time for it. Ends init (125) if it cannot be sent. */
void nsbox_agent_init_send_workspace(int sock);
/* Serve until the supervisor goes away. Never returns. */
__attribute__((noreturn)) void nsbox_agent_init_serve(int sock);
/* nsbox-oci's init, after forking the container's process (workload): serve exec requests (no
 * WORKSPACE message first), pass the signals init is sent on to the workload's group, and end
 * when it ends, with its status, after killing everything else in the sandbox. */
__attribute__((noreturn)) void nsbox_agent_init_serve_container(int sock, pid_t workload);
/* A pseudo-terminal of the sandbox's own devpts (run inside it): the master into *master, the
 * slave into fds[0..2] (three descriptors); the size from winsize (rows << 16 | cols; 0: left).
 * -1 and errno. */
int nsbox_agent_init_open_pty(uint32_t winsize, int fds[3], int *master);
/* Init's own /proc/self/oom_score_adj, opened for reading and writing while it still could
 * (commands start with 500). */
void nsbox_agent_init_set_oom_fd(int fd);
/* The stub resolver's socket (or -1) and the table of names it fills (dnsstub.h), served in
 * init's loop beside the rest. */
struct nsbox_dnsquery_table;
void nsbox_agent_init_set_dns(int fd, struct nsbox_dnsquery_table *t);

#endif
