/* SPDX-License-Identifier: Apache-2.0
 * main.c - the subcommand table.
 *
 * Each command parses its own options (getopt_long, stopping at the first
 * operand) and answers --help itself, so `airlock run -- CMD --help` reaches
 * CMD.
 */
#include <stdio.h>
#include <string.h>

#include "commands.h"
#include "util.h"

#ifndef AIRLOCK_VERSION
#define AIRLOCK_VERSION "0.1.0"
#endif

struct command {
	const char *name;
	int (*fn)(int argc, char **argv);
	const char *help;
	const char *summary;
};

static const struct command commands[] = {
	{ "run", cmd_run, cmd_run_help,
	  "run a command as an agent session under a policy" },
	{ "proxy", cmd_proxy, cmd_proxy_help,
	  "run the egress proxy alone (receipts as a session)" },
	{ "check", cmd_check, cmd_check_help,
	  "validate a policy and print its digest" },
	{ "verify", cmd_verify, cmd_verify_help,
	  "verify a signed, hash-chained receipt stream" },
	{ "keygen", cmd_keygen, cmd_keygen_help,
	  "write an Ed25519 signing key, print its public key" },
	{ "doctor", cmd_doctor, cmd_doctor_help,
	  "probe this host's isolation capabilities (JSON)" },
	{ "learn", cmd_learn, cmd_learn_help,
	  "draft a policy from what a (shadow) run needed" },
	{ "report", cmd_report, cmd_report_help,
	  "render receipt streams as one self-contained HTML page" },
	{ "export", cmd_export, cmd_export_help,
	  "convert receipts to OCSF JSON Lines for a SIEM" },
	{ "spend", cmd_spend, cmd_spend_help,
	  "show the spend ledger, change a session's cap, audit charges" },
	{ "witness", cmd_witness, cmd_witness_help,
	  "cosign receipt checkpoints that extend the last one (C2SP)" },
};

static void usage(FILE *out)
{
	size_t i;

	fputs("usage: airlock [--version] [--help] COMMAND [ARGS...]\n\n"
	      "Runs unattended AI-agent sessions under deterministic guardrails.\n\n"
	      "Commands:\n",
	      out);
	for (i = 0; i < ARRAY_SIZE(commands); i++)
		fprintf(out, "  %-8s %s\n", commands[i].name, commands[i].summary);
	fputs("\n`airlock COMMAND --help` describes a command; man airlock(1) "
	      "documents all of them.\n",
	      out);
}

static const struct command *find(const char *name)
{
	size_t i;

	for (i = 0; i < ARRAY_SIZE(commands); i++)
		if (strcmp(commands[i].name, name) == 0)
			return &commands[i];
	return NULL;
}

int main(int argc, char **argv)
{
	const struct command *cmd;

	util_stdio_fill();
	if (argc < 2) {
		usage(stderr);
		return 2;
	}
	if (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0) {
		usage(stdout);
		return 0;
	}
	if (strcmp(argv[1], "--version") == 0) {
		printf("airlock %s\n", AIRLOCK_VERSION);
		return 0;
	}
	if (strcmp(argv[1], "help") == 0) {
		if (argc < 3) {
			usage(stdout);
			return 0;
		}
		cmd = find(argv[2]);
		if (!cmd) {
			fprintf(stderr, "airlock: unknown command '%s' (see 'airlock --help')\n",
				argv[2]);
			return 2;
		}
		fputs(cmd->help, stdout);
		return 0;
	}
	cmd = find(argv[1]);
	if (!cmd) {
		fprintf(stderr, "airlock: unknown command '%s' (see 'airlock --help')\n",
			argv[1]);
		return 2;
	}
	return cmd->fn(argc - 1, argv + 1);
}
