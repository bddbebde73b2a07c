/* Finding a command's processes again from a second command in the same
 * sandbox. Engines whose exec has no kill or signal call (docker, Modal's
 * router, E2B's envd for most signals) start each command with
 * EXEC_MARKER_VAR=<marker> in its environment, which everything it starts
 * inherits; the scripts here, run as a second exec (as root where the
 * engine allows), act on every process whose environment holds it. They
 * need only POSIX sh, grep and kill in the image. */
#ifndef SBFS_EXEC_MARKER_H
#define SBFS_EXEC_MARKER_H

#include <stddef.h>

#define EXEC_MARKER_VAR "SBFS_EXEC"
/* a marker is 24 hex digits */
#define EXEC_MARKER_SIZE 25

/* A fresh random marker into out[EXEC_MARKER_SIZE]. */
void exec_marker_new(char out[EXEC_MARKER_SIZE]);

/* argv (NULL-terminated, pointing into static text and marker) that kills
 * every process holding marker, and each one's process group, three
 * times over to catch what a dying process forks. */
void exec_marker_kill_argv(const char *argv[6], const char *marker);

/* argv that sends sig to every process holding marker, once each, as a
 * terminal's Ctrl-C reaches its foreground group. */
void exec_marker_signal_argv(const char *argv[7], const char *marker, int sig);

#endif
