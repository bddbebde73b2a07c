/* A daemon that dies of a fault says so in its log before it goes: without
 * this a crash left a mount whose log ended at "mounted" and a user who
 * saw only "Software caused connection abort". */
#ifndef SBFS_CRASH_REPORT_H
#define SBFS_CRASH_REPORT_H

/* Install handlers for SIGSEGV, SIGBUS, SIGILL, SIGFPE and SIGABRT that
 * write one line and a backtrace to stderr (the log), then die of the same
 * signal (so the exit status and a core dump are what they would be).
 * A no-op under AddressSanitizer, whose own report says more. */
void sb_crash_report_install(void);

#endif
