/* SPDX-License-Identifier: Apache-2.0
 * commands.h - the subcommands dispatched by main.c. Each takes the
 * arguments after the subcommand name (argv[0] is the subcommand) and
 * returns the process exit status.
 */
#ifndef AIRLOCK_COMMANDS_H
#define AIRLOCK_COMMANDS_H

int cmd_run(int argc, char **argv);     /* cmd_run.c */
int cmd_proxy(int argc, char **argv);   /* cmd_proxy.c */
int cmd_check(int argc, char **argv);   /* cmd_check.c */
int cmd_verify(int argc, char **argv);  /* cmd_receipt.c */
int cmd_keygen(int argc, char **argv);  /* cmd_receipt.c */
int cmd_doctor(int argc, char **argv);  /* doctor.c */
int cmd_learn(int argc, char **argv);   /* cmd_learn.c */
int cmd_report(int argc, char **argv);  /* cmd_report.c */
int cmd_export(int argc, char **argv);  /* cmd_export.c */
int cmd_spend(int argc, char **argv);   /* cmd_spend.c */
int cmd_witness(int argc, char **argv); /* witness.c */

/* Help texts, printed by `airlock CMD --help` and `airlock help CMD`. */
extern const char cmd_run_help[];
extern const char cmd_proxy_help[];
extern const char cmd_check_help[];
extern const char cmd_verify_help[];
extern const char cmd_keygen_help[];
extern const char cmd_doctor_help[];
extern const char cmd_learn_help[];
extern const char cmd_report_help[];
extern const char cmd_export_help[];
extern const char cmd_spend_help[];
extern const char cmd_witness_help[];

#endif /* AIRLOCK_COMMANDS_H */
