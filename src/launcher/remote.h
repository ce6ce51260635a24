/* What crlaunch says to its agents on other hosts.
 *
 * For every remote host, crlaunch runs
 *
 *     <ssh words...> -T -o BatchMode=yes ... HOST exec '/path/to/crlaunch' --agent
 *
 * and the agent, a crlaunch on that host, starts the host's ranks and
 * forwards their output (tagged with their global rank when asked) back over
 * the SSH session's stdout and stderr. Everything the agent needs goes over
 * the session's standard input, never on a command line, where `ps` on
 * either host would show it:
 *
 *   1. The configuration: a block of NUL-terminated "name=value" items ended
 *      by an empty item (so values may hold any byte but NUL):
 *        v=1                      protocol version
 *        key=<64 hex digits>      the job key
 *        cwd=<dir>                where the ranks start (crlaunch's own)
 *        rendezvous=<host:port>   CRNET_RENDEZVOUS for this host's ranks
 *        init_timeout=<seconds>   CRNET_INIT_TIMEOUT
 *        grace_ms=<ms>            crlaunch --grace: how long this host's
 *                                 ranks get after a failure
 *        size=<p>  first=<r>  count=<n>    the job and this host's share
 *        tag=0|1                  prefix output lines with "[rank] "
 *        report=<16 hex digits>   the marker of the agent's reports
 *        env=NAME=VALUE           set in the ranks' environment (repeated)
 *        arg=<word>               the program and its arguments (repeated)
 *   2. Then, one command at a time, for as long as the job runs:
 *        'R'            every rank has reached the rendezvous: the agent
 *                       removes its copy of the key file
 *        'S' <signum>   pass this signal to the ranks (one byte)
 *        'T' <line> '\n'
 *                       tell the ranks this line on their report sockets,
 *                       as crlaunch does its own: "abort <rank> <code>",
 *                       "fail <rank> <origin>" or "gone <rank> <status>
 *                       <signal>" (crlaunch.c, tell_ranks)
 *        'H'            a heartbeat, every 5 s: an agent that hears nothing
 *                       for 60 s (a partition that ends no session) takes
 *                       crlaunch for gone, as at end of file
 *   3. End of file: crlaunch is gone or done. The agent stops its ranks
 *      (SIGTERM, SIGKILL 2 s later) and exits. So neither a crashed crlaunch
 *      nor a lost SSH connection leaves a rank behind.
 *
 * The agent reports each rank that fails at once, on its stderr, so that
 * crlaunch can tell which rank of the whole job failed first:
 *
 *     <report marker> exit <rank> <pid> <status> <signal>
 *     <report marker> abort <rank> <pid> <code>   (crnet_comm_abort)
 *
 * The marker is random per job and known only to crlaunch and its agents,
 * so a rank cannot forge a report by printing one. The agent's exit status
 * is that of its first failing rank, in crlaunch's own terms (see
 * crlaunch.c); SSH passes it on.
 */
#ifndef CRNET_REMOTE_H
#define CRNET_REMOTE_H

#include <stddef.h>
#include <stdint.h>

#include "handshake.h"

#define CRNET__AGENT_VERSION 3
#define CRNET__AGENT_KEY_DONE 'R'
#define CRNET__AGENT_SIGNAL 'S'
#define CRNET__AGENT_HEARTBEAT 'H'
/* Followed by a line for the ranks (see above). */
#define CRNET__AGENT_TELL 'T'
/* A configuration larger than this is refused (the environment sent is
 * CRNET_* and -x variables, so this is generous). */
#define CRNET__AGENT_CONFIG_MAX (1 << 20)

typedef struct crnet__agent_config {
  uint8_t key[CRNET__KEY_BYTES];
  char *cwd;
  char *rendezvous;
  char *init_timeout;
  int grace_ms; /* crlaunch --grace */
  int size;
  int first;
  int count;
  int tag_output;
  int bind_none;       /* crlaunch --bind none */
  int report_bindings; /* crlaunch --report-bindings */
  char *report; /* the report marker */
  char **env; /* nenv "NAME=VALUE" entries */
  int nenv;
  char **argv; /* argc words and a NULL */
  int argc;
} crnet__agent_config;

/* Encodes c into a fresh buffer (*out, *len). The caller wipes and frees it
 * (it holds the key). 0 or -1 (out of memory). */
int crnet__agent_config_encode(const crnet__agent_config *c, char **out,
                               size_t *len);

/* Decodes a block (the bytes before and including the ending empty item).
 * 0, or -1 with a message in why; c is then freed. */
int crnet__agent_config_decode(const char *buf, size_t len,
                               crnet__agent_config *c, char *why,
                               size_t why_len);

/* Reads one block from fd (blocking, byte by byte so that the commands that
 * follow stay unread) and decodes it. 0 or -1 with why. */
int crnet__agent_config_read(int fd, crnet__agent_config *c, char *why,
                             size_t why_len);

/* Frees c's strings and wipes its key. */
void crnet__agent_config_free(crnet__agent_config *c);

/* Splits an ssh command ("ssh -p 2222 -i 'my key'") into words: blanks
 * separate words; single quotes keep everything; double quotes keep
 * everything but backslash escapes; a backslash outside quotes escapes the
 * next character. *argv is a fresh NULL-terminated array of fresh strings.
 * 0, or -1 with why (unbalanced quote, no words, out of memory). */
int crnet__split_words(const char *cmd, char ***argv, int *argc, char *why,
                       size_t why_len);
void crnet__free_words(char **argv);

/* s in single quotes for a POSIX shell ('it'\''s'), freshly allocated, or
 * NULL when out of memory. */
char *crnet__shell_quote(const char *s);

#endif
