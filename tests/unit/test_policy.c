/* pycell: unit tests for policy files (src/config/policy.c, man pycell-policy(5)). */
#include "config.h"

#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "config/json_check.h"
#include "config/policy.h"
#include "config/policy_fields.h"
#include "jail/seccomp.h"
#include "unit.h"

/* Test documents are written with ' for " to stay readable. */
static char *jq(const char *s)
{
	char *d = xstrdup(s);
	for (char *p = d; *p; p++)
		if (*p == '\'')
			*p = '"';
	return d;
}


/* Every malformed document and the exact message it gets, origin "t.json". */
static const struct { const char *json; const char *msg; } bad[] = {
	/* syntax */
	{ "{'limits': }", "policy t.json:1:12: invalid JSON: unexpected token near '}'" },
	{ "{\n  'limits': lots\n}", "policy t.json:2:16: invalid JSON: invalid token near 'lots'" },
	{ "{'network': 'none', 'network': 'loopback'}",
	  "policy t.json:1:29: invalid JSON: duplicate object key near '\"network\"'" },
	{ "", "policy t.json:1:0: invalid JSON: '[' or '{' expected near end of file" },
	{ "{} {}", "policy t.json:1:4: invalid JSON: end of file expected near '{'" },
	{ "{'python': {'env': {'A\\u0000B': 'x'}}}",
	  "policy t.json:1:30: invalid JSON: NUL byte in object key not supported near '\"A\\u0000B\"'" },
	{ "[]", "policy t.json: expected a JSON object at the top level, got []" },
	/* unknown keys */
	{ "{'frobnicate': 1}", "policy t.json: frobnicate: unknown key (expected one of extends, description, limits, filesystem, network, seccomp, python, tools, packages, backend, sessions, identity)" },
	{ "{'Limits': {}}", "policy t.json: Limits: unknown key (expected one of extends, description, limits, filesystem, network, seccomp, python, tools, packages, backend, sessions, identity)" },
	{ "{'limits': {'mem': '1G'}}", "policy t.json: limits.mem: unknown key (expected one of timeout, memory, cpu, pids, output, tmp, workspace, file_size, open_files)" },
	{ "{'filesystem': {'tmp': true}}", "policy t.json: filesystem.tmp: unknown key (expected one of binds, ca_certificates, dev_shm)" },
	{ "{'filesystem': {'binds': [{'src': '/opt', 'mode': 'ro'}]}}", "policy t.json: filesystem.binds[0].mode: unknown key (expected one of src, dst, optional, writable)" },
	{ "{'seccomp': {'default': 'allow'}}", "policy t.json: seccomp.default: unknown key (expected one of groups, rules)" },
	{ "{'seccomp': {'rules': [{'syscall': 'ptrace', 'action': 'kill', 'arg': 1}]}}", "policy t.json: seccomp.rules[0].arg: unknown key (expected one of syscall, action)" },
	{ "{'python': {'path': '/usr/bin/python3'}}", "policy t.json: python.path: unknown key (expected one of interpreter, flags, preload, env)" },
	{ "{'tools': {'deny': []}}", "policy t.json: tools.deny: unknown key (expected one of allow, budget, max_argument_bytes, max_result_bytes)" },
	{ "{'identity': {'user': 'pycell'}}", "policy t.json: identity.user: unknown key (expected one of uid, gid, hostname)" },
	/* description */
	{ "{'description': 5}", "policy t.json: description: expected a non-empty string, got 5" },
	{ "{'description': ''}", "policy t.json: description: expected a non-empty string, got \"\"" },
	/* limits */
	{ "{'limits': []}", "policy t.json: limits: expected an object, got []" },
	{ "{'limits': {'memory': 'lots'}}", "policy t.json: limits.memory: expected a size such as 512M, got \"lots\"" },
	{ "{'limits': {'memory': -1}}", "policy t.json: limits.memory: expected a size such as 512M, got -1" },
	{ "{'limits': {'memory': 1.5}}", "policy t.json: limits.memory: expected a size such as 512M, got 1.5" },
	{ "{'limits': {'memory': true}}", "policy t.json: limits.memory: expected a size such as 512M, got true" },
	{ "{'limits': {'memory': null}}", "policy t.json: limits.memory: expected a size such as 512M, got null" },
	{ "{'limits': {'memory': '512 M'}}", "policy t.json: limits.memory: expected a size such as 512M, got \"512 M\"" },
	{ "{'limits': {'memory': '8M'}}", "policy t.json: limits.memory: expected a size of at least 16M (or 0 for no limit), got \"8M\"" },
	{ "{'limits': {'memory': 1000}}", "policy t.json: limits.memory: expected a size of at least 16M (or 0 for no limit), got 1000" },
	{ "{'limits': {'memory': '16M\\u0000'}}", "policy t.json: limits.memory: expected a size such as 512M, got \"16M\\u0000\"" },
	{ "{'limits': {'timeout': 'soon'}}", "policy t.json: limits.timeout: expected a duration such as 30s, 500ms or 2m, got \"soon\"" },
	{ "{'limits': {'timeout': -1}}", "policy t.json: limits.timeout: expected a duration such as 30s, 500ms or 2m, got -1" },
	{ "{'limits': {'timeout': '1d'}}", "policy t.json: limits.timeout: expected a duration such as 30s, 500ms or 2m, got \"1d\"" },
	{ "{'limits': {'timeout': '25h'}}", "policy t.json: limits.timeout: expected a duration from 10ms to 24h (or 0 for no limit), got \"25h\"" },
	{ "{'limits': {'timeout': '5ms'}}", "policy t.json: limits.timeout: expected a duration from 10ms to 24h (or 0 for no limit), got \"5ms\"" },
	{ "{'limits': {'timeout': 0.001}}", "policy t.json: limits.timeout: expected a duration from 10ms to 24h (or 0 for no limit), got 0.001" },
	{ "{'limits': {'cpu': '1'}}", "policy t.json: limits.cpu: expected a number of cores from 0.01 to 1024 (or 0 for no limit), got \"1\"" },
	{ "{'limits': {'cpu': -1}}", "policy t.json: limits.cpu: expected a number of cores from 0.01 to 1024 (or 0 for no limit), got -1" },
	{ "{'limits': {'cpu': 0.001}}", "policy t.json: limits.cpu: expected a number of cores from 0.01 to 1024 (or 0 for no limit), got 0.001" },
	{ "{'limits': {'cpu': 2000}}", "policy t.json: limits.cpu: expected a number of cores from 0.01 to 1024 (or 0 for no limit), got 2000" },
	{ "{'limits': {'pids': 1}}", "policy t.json: limits.pids: expected an integer from 2 to 4194304 (or 0 for no limit), got 1" },
	{ "{'limits': {'pids': -5}}", "policy t.json: limits.pids: expected an integer from 2 to 4194304 (or 0 for no limit), got -5" },
	{ "{'limits': {'pids': 1.5}}", "policy t.json: limits.pids: expected an integer from 2 to 4194304 (or 0 for no limit), got 1.5" },
	{ "{'limits': {'pids': '64'}}", "policy t.json: limits.pids: expected an integer from 2 to 4194304 (or 0 for no limit), got \"64\"" },
	{ "{'limits': {'pids': 5000000}}", "policy t.json: limits.pids: expected an integer from 2 to 4194304 (or 0 for no limit), got 5000000" },
	{ "{'limits': {'output': 0}}", "policy t.json: limits.output: expected a size from 1K to 1G, got 0" },
	{ "{'limits': {'output': '2G'}}", "policy t.json: limits.output: expected a size from 1K to 1G, got \"2G\"" },
	{ "{'limits': {'tmp': 0}}", "policy t.json: limits.tmp: expected a size of at least 1M, got 0" },
	{ "{'limits': {'workspace': '512K'}}", "policy t.json: limits.workspace: expected a size of at least 1M, got \"512K\"" },
	{ "{'limits': {'file_size': '1K'}}", "policy t.json: limits.file_size: expected a size of at least 4K (or 0 for no limit), got \"1K\"" },
	{ "{'limits': {'open_files': 8}}", "policy t.json: limits.open_files: expected an integer from 16 to 1048576, got 8" },
	{ "{'limits': {'open_files': 0}}", "policy t.json: limits.open_files: expected an integer from 16 to 1048576, got 0" },
	{ "{'limits': {'open_files': 2000000}}", "policy t.json: limits.open_files: expected an integer from 16 to 1048576, got 2000000" },
	/* filesystem */
	{ "{'filesystem': true}", "policy t.json: filesystem: expected an object, got true" },
	{ "{'filesystem': {'binds': {}}}", "policy t.json: filesystem.binds: expected an array, got {}" },
	{ "{'filesystem': {'binds': [5]}}", "policy t.json: filesystem.binds[0]: expected a path or an object such as {\"src\": \"/opt/venv\"}, got 5" },
	{ "{'filesystem': {'binds': ['opt/venv']}}", "policy t.json: filesystem.binds[0]: expected an absolute path, got \"opt/venv\"" },
	{ "{'filesystem': {'binds': [{'src': 'opt/venv'}]}}", "policy t.json: filesystem.binds[0].src: expected an absolute path, got \"opt/venv\"" },
	{ "{'filesystem': {'binds': [{'src': ''}]}}", "policy t.json: filesystem.binds[0].src: expected an absolute path, got \"\"" },
	{ "{'filesystem': {'binds': [{'src': '/opt/venv', 'dst': 'venv'}]}}", "policy t.json: filesystem.binds[0].dst: expected an absolute path, got \"venv\"" },
	{ "{'filesystem': {'binds': [{'src': '/opt/venv', 'dst': '/opt/../etc'}]}}", "policy t.json: filesystem.binds[0].dst: expected a normalized absolute path (no \".\", \"..\" or empty components), got \"/opt/../etc\"" },
	{ "{'filesystem': {'binds': [{'src': '/opt/venv', 'dst': '/..'}]}}", "policy t.json: filesystem.binds[0].dst: expected a normalized absolute path (no \".\", \"..\" or empty components), got \"/..\"" },
	{ "{'filesystem': {'binds': [{'src': '/opt/venv', 'dst': '/opt/./venv'}]}}", "policy t.json: filesystem.binds[0].dst: expected a normalized absolute path (no \".\", \"..\" or empty components), got \"/opt/./venv\"" },
	{ "{'filesystem': {'binds': [{'src': '/opt/venv', 'dst': '//opt'}]}}", "policy t.json: filesystem.binds[0].dst: expected a normalized absolute path (no \".\", \"..\" or empty components), got \"//opt\"" },
	{ "{'filesystem': {'binds': [{'src': '/opt/venv/'}]}}", "policy t.json: filesystem.binds[0].src: expected a normalized absolute path (no \".\", \"..\" or empty components), got \"/opt/venv/\"" },
	{ "{'filesystem': {'binds': [{'src': '/opt/../../etc'}]}}", "policy t.json: filesystem.binds[0].src: expected a normalized absolute path (no \".\", \"..\" or empty components), got \"/opt/../../etc\"" },
	{ "{'filesystem': {'binds': [{'src': '/opt/venv', 'dst': '/'}]}}", "policy t.json: filesystem.binds[0].dst: cannot bind over the jail's root \"/\"" },
	{ "{'filesystem': {'binds': [{'src': '/', 'dst': '/host'}]}}", "policy t.json: filesystem.binds[0].src: cannot bind the host's root \"/\"" },
	{ "{'filesystem': {'binds': [{'src': '/opt/x', 'dst': '/proc/sys'}]}}", "policy t.json: filesystem.binds[0].dst: \"/proc/sys\" is inside /proc, which the jail provides" },
	{ "{'filesystem': {'binds': [{'src': '/opt/x', 'dst': '/dev'}]}}", "policy t.json: filesystem.binds[0].dst: \"/dev\" is inside /dev, which the jail provides" },
	{ "{'filesystem': {'binds': [{'src': '/sys/fs/cgroup', 'dst': '/cg'}]}}", "policy t.json: filesystem.binds[0].src: \"/sys/fs/cgroup\" is inside /sys, which would expose the host kernel's interfaces" },
	{ "{'filesystem': {'binds': ['/proc']}}", "policy t.json: filesystem.binds[0]: \"/proc\" is inside /proc, which would expose the host kernel's interfaces" },
	{ "{'filesystem': {'binds': [{'dst': '/opt'}]}}", "policy t.json: filesystem.binds[0].src: missing (the host path to bind)" },
	{ "{'filesystem': {'binds': [{'src': '/opt\\u0000x'}]}}", "policy t.json: filesystem.binds[0].src: string contains a NUL byte" },
	{ "{'filesystem': {'binds': ['/opt/a', {'src': '/srv/a', 'dst': '/opt/a'}]}}", "policy t.json: filesystem.binds[1]: \"/opt/a\" is already the destination of filesystem.binds[0]" },
	{ "{'filesystem': {'binds': [{'src': '/opt', 'optional': 'yes'}]}}", "policy t.json: filesystem.binds[0].optional: expected true or false, got \"yes\"" },
	{ "{'filesystem': {'binds': [{'src': '/opt', 'writable': 1}]}}", "policy t.json: filesystem.binds[0].writable: expected true or false, got 1" },
	{ "{'filesystem': {'ca_certificates': 'no'}}", "policy t.json: filesystem.ca_certificates: expected true or false, got \"no\"" },
	{ "{'filesystem': {'dev_shm': null}}", "policy t.json: filesystem.dev_shm: expected true or false, got null" },
	/* network, backend */
	{ "{'network': 'host'}", "policy t.json: network: expected \"none\" or \"loopback\", got \"host\"" },
	{ "{'network': 'None'}", "policy t.json: network: expected \"none\" or \"loopback\", got \"None\"" },
	{ "{'network': 0}", "policy t.json: network: expected \"none\", \"loopback\" or {\"egress\": [\"HOST:PORT\", ...]}, got 0" },
	{ "{'network': 'egress'}", "policy t.json: network: an egress network lists its destinations: {\"egress\": [\"api.example.com:443\"]}" },
	{ "{'network': {}}", "policy t.json: network.egress: missing (the destinations a run may reach, e.g. [\"api.example.com:443\"])" },
	{ "{'network': {'egress': ['a.test:1'], 'dns': 1}}", "policy t.json: network.dns: unknown key (expected one of egress)" },
	{ "{'network': {'egress': 'a.test:443'}}", "policy t.json: network.egress: expected an array of strings, got \"a.test:443\"" },
	{ "{'network': {'egress': []}}", "policy t.json: network.egress: empty: give at least one destination, or use \"none\"" },
	{ "{'network': {'egress': ['a.test']}}", "policy t.json: network.egress[0]: \"a.test\": no port: write HOST:PORT, or HOST:* for any port" },
	{ "{'network': {'egress': ['a.test:']}}", "policy t.json: network.egress[0]: \"a.test:\": the port is not a number from 1 to 65535 (or *)" },
	{ "{'network': {'egress': ['a.test:65536']}}", "policy t.json: network.egress[0]: \"a.test:65536\": the port is not a number from 1 to 65535 (or *)" },
	{ "{'network': {'egress': [':80']}}", "policy t.json: network.egress[0]: \":80\": no host before the port" },
	{ "{'network': {'egress': ['[2001:db8::1]:443']}}", "policy t.json: network.egress[0]: \"[2001:db8::1]:443\": IPv6 destinations are not supported (an egress run has IPv4 only)" },
	{ "{'network': {'egress': ['10.1.0.0/33:5432']}}", "policy t.json: network.egress[0]: \"10.1.0.0/33:5432\": the prefix length after / is not a number from 0 to 32" },
	{ "{'network': {'egress': ['10.1.2.0/16:5432']}}", "policy t.json: network.egress[0]: \"10.1.2.0/16:5432\": the address has bits set past its prefix length (write the network's first address)" },
	{ "{'network': {'egress': ['a.test/8:80']}}", "policy t.json: network.egress[0]: \"a.test/8:80\": a prefix length goes after an IPv4 address only" },
	{ "{'network': {'egress': ['10.1.2:80']}}", "policy t.json: network.egress[0]: \"10.1.2:80\": not an IPv4 address (four numbers from 0 to 255)" },
	{ "{'network': {'egress': ['-a.test:80']}}", "policy t.json: network.egress[0]: \"-a.test:80\": not a host name (labels of letters, digits, - and _, dots between)" },
	{ "{'network': {'egress': ['a b.test:80']}}", "policy t.json: network.egress[0]: \"a b.test:80\": not a host name (labels of letters, digits, - and _, dots between)" },
	{ "{'packages': {'index': 'ftp://x.test/simple/'}}", "policy t.json: packages.index: \"ftp://x.test/simple/\": an http:// or https:// URL" },
	{ "{'packages': {'index': 'https://x.test:99999/simple/'}}", "policy t.json: packages.index: \"https://x.test:99999/simple/\": the host and port (x.test:99999): the port is not a number from 1 to 65535 (or *)" },
	{ "{'packages': {'index': 'http:///simple/'}}", "policy t.json: packages.index: \"http:///simple/\": the host and port (:80): no host before the port" },
	{ "{'packages': {'index': 'https://x.test/simple/?q=1'}}", "policy t.json: packages.index: \"https://x.test/simple/?q=1\": the path has characters other than letters, digits and - . _ ~ / %" },
	{ "{'packages': {'index': 'https://u@x.test/'}}", "policy t.json: packages.index: \"https://u@x.test/\": the host and port (u@x.test:443): not a host name (labels of letters, digits, - and _, dots between)" },
	{ "{'packages': {'index': 5}}", "policy t.json: packages.index: expected an index URL such as \"https://pypi.org/simple/\", got 5" },
	{ "{'packages': {'allow': ['pandas >=2']}}", "policy t.json: packages.allow[0]: \"pandas >=2\": after the name: version specifiers such as ==1.2 or >=2,<3 (no extras, markers, spaces or URLs)" },
	{ "{'packages': {'allow': ['-x']}}", "policy t.json: packages.allow[0]: \"-x\": not a package name (letters, digits, . _ -, starting and ending with a letter or digit)" },
	{ "{'packages': {'allow': ['x==']}}", "policy t.json: packages.allow[0]: \"x==\": a version specifier without a version" },
	{ "{'packages': {'mirror': 1}}", "policy t.json: packages.mirror: unknown key (expected one of index, ca_bundle, allow)" },
	{ "{'network': {'egress': ['a.test:80', 'a.test:80']}}", "policy t.json: network.egress[1]: \"a.test:80\" is listed twice" },
	{ "{'network': 'none\\u0000x'}", "policy t.json: network: expected \"none\" or \"loopback\", got \"none\\u0000x\"" },
	{ "{'backend': 'docker'}", "policy t.json: backend: expected \"native\" or \"wasm\", got \"docker\"" },
	{ "{'backend': ['native']}", "policy t.json: backend: expected \"native\" or \"wasm\", got [\"native\"]" },
	/* wasm: refused by name where it is not built in, never run as CPython;
	 * where it is, what it cannot give is refused */
#ifndef HAVE_WASM
	{ "{'backend': 'wasm'}", "policy t.json: backend: \"wasm\" (Pyodide) is not built into this pycell (configure --with-wasm): use \"native\" or leave backend out" },
#else
	{ "{'backend': 'wasm', 'network': {'egress': ['192.0.2.1:443']}}", "policy t.json: network: an egress list needs the native backend: the wasm backend (Pyodide) has no sockets" },
	{ "{'backend': 'wasm', 'limits': {'open_files': 1001}}", "policy t.json: limits.open_files: at most 1000 with the wasm backend (node is executed from descriptor 1000, which its program must never be able to open)" },
	{ "{'backend': 'wasm', 'python': {'env': {'NODE_OPTIONS': '-r x'}}}", "policy t.json: python.env: NODE_OPTIONS: not with the wasm backend (Node, which runs it, would read it)" },
#endif
	/* seccomp */
	{ "{'seccomp': []}", "policy t.json: seccomp: expected an object, got []" },
	{ "{'seccomp': {'groups': 'base'}}", "policy t.json: seccomp.groups: expected an array of strings, got \"base\"" },
	{ "{'seccomp': {'groups': ['']}}", "policy t.json: seccomp.groups[0]: expected a non-empty string, got \"\"" },
	{ "{'seccomp': {'groups': [1]}}", "policy t.json: seccomp.groups[0]: expected a non-empty string, got 1" },
	{ "{'seccomp': {'rules': {}}}", "policy t.json: seccomp.rules: expected an array, got {}" },
	{ "{'seccomp': {'rules': ['ptrace']}}", "policy t.json: seccomp.rules[0]: expected an object, got \"ptrace\"" },
	{ "{'seccomp': {'rules': [{'action': 'kill'}]}}", "policy t.json: seccomp.rules[0].syscall: missing (the name of a system call)" },
	{ "{'seccomp': {'rules': [{'syscall': 'notacall', 'action': 'kill'}]}}", "policy t.json: seccomp.rules[0].syscall: unknown system call \"notacall\"" },
	{ "{'seccomp': {'rules': [{'syscall': 'socketcall', 'action': 'kill'}]}}", "policy t.json: seccomp.rules[0].syscall: \"socketcall\" is not a system call on this architecture" },
	{ "{'seccomp': {'rules': [{'syscall': 5, 'action': 'kill'}]}}", "policy t.json: seccomp.rules[0].syscall: expected a non-empty string, got 5" },
	{ "{'seccomp': {'rules': [{'syscall': 'ptrace'}]}}", "policy t.json: seccomp.rules[0].action: missing (\"allow\", \"kill\" or \"errno:NAME\")" },
	{ "{'seccomp': {'rules': [{'syscall': 'ptrace', 'action': 'deny'}]}}", "policy t.json: seccomp.rules[0].action: expected \"allow\", \"kill\" or \"errno:NAME\" such as \"errno:EPERM\", got \"deny\"" },
	{ "{'seccomp': {'rules': [{'syscall': 'ptrace', 'action': 'errno:'}]}}", "policy t.json: seccomp.rules[0].action: expected \"allow\", \"kill\" or \"errno:NAME\" such as \"errno:EPERM\", got \"errno:\"" },
	{ "{'seccomp': {'rules': [{'syscall': 'ptrace', 'action': 'errno:EFOO'}]}}", "policy t.json: seccomp.rules[0].action: expected \"allow\", \"kill\" or \"errno:NAME\" such as \"errno:EPERM\", got \"errno:EFOO\"" },
	{ "{'seccomp': {'rules': [{'syscall': 'ptrace', 'action': 'errno:eperm'}]}}", "policy t.json: seccomp.rules[0].action: expected \"allow\", \"kill\" or \"errno:NAME\" such as \"errno:EPERM\", got \"errno:eperm\"" },
	{ "{'seccomp': {'rules': [{'syscall': 'ptrace', 'action': 'errno:0'}]}}", "policy t.json: seccomp.rules[0].action: expected \"allow\", \"kill\" or \"errno:NAME\" such as \"errno:EPERM\", got \"errno:0\"" },
	{ "{'seccomp': {'rules': [{'syscall': 'ptrace', 'action': 'errno:4096'}]}}", "policy t.json: seccomp.rules[0].action: expected \"allow\", \"kill\" or \"errno:NAME\" such as \"errno:EPERM\", got \"errno:4096\"" },
	{ "{'seccomp': {'rules': [{'syscall': 'ptrace', 'action': 'errno:-1'}]}}", "policy t.json: seccomp.rules[0].action: expected \"allow\", \"kill\" or \"errno:NAME\" such as \"errno:EPERM\", got \"errno:-1\"" },
	{ "{'seccomp': {'rules': [{'syscall': 'ptrace', 'action': 'Kill'}]}}", "policy t.json: seccomp.rules[0].action: expected \"allow\", \"kill\" or \"errno:NAME\" such as \"errno:EPERM\", got \"Kill\"" },
	{ "{'seccomp': {'rules': [{'syscall': 'ptrace', 'action': 1}]}}", "policy t.json: seccomp.rules[0].action: expected \"allow\", \"kill\" or \"errno:NAME\" such as \"errno:EPERM\", got 1" },
	{ "{'seccomp': {'rules': [{'syscall': 'ptrace', 'action': 'kill'}, {'syscall': 'ptrace', 'action': 'allow'}]}}", "policy t.json: seccomp.rules[1].syscall: \"ptrace\" already has a rule" },
	/* python */
	{ "{'python': 'python3'}", "policy t.json: python: expected an object, got \"python3\"" },
	{ "{'python': {'interpreter': 'python3'}}", "policy t.json: python.interpreter: expected an absolute path, got \"python3\"" },
	{ "{'python': {'interpreter': '/usr/bin/../bin/python3'}}", "policy t.json: python.interpreter: expected a normalized absolute path (no \".\", \"..\" or empty components), got \"/usr/bin/../bin/python3\"" },
	{ "{'python': {'flags': '-B'}}", "policy t.json: python.flags: expected an array of strings, got \"-B\"" },
	{ "{'python': {'flags': ['-c']}}", "policy t.json: python.flags[0]: expected an interpreter option such as -B, -X utf8 or -W error, got \"-c\"" },
	{ "{'python': {'flags': ['-B', '-m']}}", "policy t.json: python.flags[1]: expected an interpreter option such as -B, -X utf8 or -W error, got \"-m\"" },
	{ "{'python': {'flags': ['-Bc']}}", "policy t.json: python.flags[0]: expected an interpreter option such as -B, -X utf8 or -W error, got \"-Bc\"" },
	{ "{'python': {'flags': ['script.py']}}", "policy t.json: python.flags[0]: expected an interpreter option such as -B, -X utf8 or -W error, got \"script.py\"" },
	{ "{'python': {'flags': ['-']}}", "policy t.json: python.flags[0]: expected an interpreter option such as -B, -X utf8 or -W error, got \"-\"" },
	{ "{'python': {'flags': ['--help']}}", "policy t.json: python.flags[0]: expected an interpreter option such as -B, -X utf8 or -W error, got \"--help\"" },
	{ "{'python': {'flags': ['-i']}}", "policy t.json: python.flags[0]: expected an interpreter option such as -B, -X utf8 or -W error, got \"-i\"" },
	{ "{'python': {'flags': ['-I']}}", "policy t.json: python.flags[0]: \"-I\": -I and -E would hide the pycell module, which is found through PYTHONPATH (the jail's environment is already clean)" },
	{ "{'python': {'flags': ['-BE']}}", "policy t.json: python.flags[0]: \"-BE\": -I and -E would hide the pycell module, which is found through PYTHONPATH (the jail's environment is already clean)" },
	{ "{'python': {'env': {'PYTHONPATH': '/opt/lib'}}}", "policy t.json: python.env.PYTHONPATH: set by pycell, which finds its module through it (bind a directory or use a venv's interpreter instead)" },
	{ "{'python': {'flags': ['-X']}}", "policy t.json: python.flags[0]: \"-X\" needs an argument after it" },
	{ "{'python': {'flags': ['']}}", "policy t.json: python.flags[0]: expected a non-empty string, got \"\"" },
	{ "{'python': {'flags': ['-B', '-B']}}", "policy t.json: python.flags[1]: \"-B\" is listed twice" },
	{ "{'python': {'env': []}}", "policy t.json: python.env: expected an object of strings such as {\"LANG\": \"C.UTF-8\"}, got []" },
	{ "{'python': {'env': {'A=B': 'x'}}}", "policy t.json: python.env: \"A=B\" is not a variable name (letters, digits and _, not starting with a digit)" },
	{ "{'python': {'env': {'1A': 'x'}}}", "policy t.json: python.env: \"1A\" is not a variable name (letters, digits and _, not starting with a digit)" },
	{ "{'python': {'env': {'': 'x'}}}", "policy t.json: python.env: \"\" is not a variable name (letters, digits and _, not starting with a digit)" },
	{ "{'python': {'env': {'A B': 'x'}}}", "policy t.json: python.env: \"A B\" is not a variable name (letters, digits and _, not starting with a digit)" },
	{ "{'python': {'env': {'A': 1}}}", "policy t.json: python.env.A: expected a string, got 1" },
	{ "{'python': {'env': {'A': null}}}", "policy t.json: python.env.A: expected a string, got null" },
	{ "{'python': {'env': {'A': 'x\\u0000y'}}}", "policy t.json: python.env.A: string contains a NUL byte" },
	/* tools */
	{ "{'tools': []}", "policy t.json: tools: expected an object, got []" },
	{ "{'tools': {'allow': 'memory.*'}}", "policy t.json: tools.allow: expected an array of strings, got \"memory.*\"" },
	{ "{'tools': {'allow': ['*']}}", "policy t.json: tools.allow[0]: expected a tool name such as memory.read_graph or a pattern such as memory.*, got \"*\"" },
	{ "{'tools': {'allow': ['memory']}}", "policy t.json: tools.allow[0]: expected a tool name such as memory.read_graph or a pattern such as memory.*, got \"memory\"" },
	{ "{'tools': {'allow': ['Memory.read_graph']}}", "policy t.json: tools.allow[0]: expected a tool name such as memory.read_graph or a pattern such as memory.*, got \"Memory.read_graph\"" },
	{ "{'tools': {'allow': ['memory.*x']}}", "policy t.json: tools.allow[0]: expected a tool name such as memory.read_graph or a pattern such as memory.*, got \"memory.*x\"" },
	{ "{'tools': {'allow': ['memory.read*']}}", "policy t.json: tools.allow[0]: expected a tool name such as memory.read_graph or a pattern such as memory.*, got \"memory.read*\"" },
	{ "{'tools': {'allow': ['memory.']}}", "policy t.json: tools.allow[0]: expected a tool name such as memory.read_graph or a pattern such as memory.*, got \"memory.\"" },
	{ "{'tools': {'allow': ['.read_graph']}}", "policy t.json: tools.allow[0]: expected a tool name such as memory.read_graph or a pattern such as memory.*, got \".read_graph\"" },
	{ "{'tools': {'allow': ['memory. read_graph']}}", "policy t.json: tools.allow[0]: expected a tool name such as memory.read_graph or a pattern such as memory.*, got \"memory. read_graph\"" },
	{ "{'tools': {'allow': [' memory.read_graph']}}", "policy t.json: tools.allow[0]: expected a tool name such as memory.read_graph or a pattern such as memory.*, got \" memory.read_graph\"" },
	{ "{'tools': {'allow': ['memory.read_graph\\n']}}", "policy t.json: tools.allow[0]: expected a tool name such as memory.read_graph or a pattern such as memory.*, got \"memory.read_graph\\n\"" },
	{ "{'tools': {'allow': ['memory.r\\u00e9ad']}}", "policy t.json: tools.allow[0]: expected a tool name such as memory.read_graph or a pattern such as memory.*, got \"memory.réad\"" },
	{ "{'tools': {'allow': ['mem\\u043ery.*']}}", "policy t.json: tools.allow[0]: expected a tool name such as memory.read_graph or a pattern such as memory.*, got \"memоry.*\"" },
	{ "{'tools': {'allow': ['memory.read\\u0000x']}}", "policy t.json: tools.allow[0]: string contains a NUL byte" },
	{ "{'tools': {'allow': ['memory.*', 'memory.*']}}", "policy t.json: tools.allow[1]: \"memory.*\" is listed twice" },
	{ "{'tools': {'budget': -1}}", "policy t.json: tools.budget: expected an integer from 0 to 100000, got -1" },
	{ "{'tools': {'budget': 100001}}", "policy t.json: tools.budget: expected an integer from 0 to 100000, got 100001" },
	{ "{'tools': {'budget': '5'}}", "policy t.json: tools.budget: expected an integer from 0 to 100000, got \"5\"" },
	{ "{'tools': {'max_argument_bytes': '100'}}", "policy t.json: tools.max_argument_bytes: expected a size from 1K to 16M, got \"100\"" },
	{ "{'tools': {'max_argument_bytes': 'big'}}", "policy t.json: tools.max_argument_bytes: expected a size such as 512M, got \"big\"" },
	{ "{'tools': {'max_result_bytes': '1G'}}", "policy t.json: tools.max_result_bytes: expected a size from 1K to 64M, got \"1G\"" },
	/* sessions: as many as the kernel numbers memory cgroups */
	{ "{'sessions': {'max': 65536}}", "policy t.json: sessions.max: expected an integer from 0 to 65535, got 65536" },
	{ "{'sessions': {'max_per_client': 0}}", "policy t.json: sessions.max_per_client: expected an integer from 1 to 65535, got 0" },
	{ "{'sessions': {'max_per_client': 65536}}", "policy t.json: sessions.max_per_client: expected an integer from 1 to 65535, got 65536" },
	{ "{'sessions': {'shared_memory': '63M'}}", "policy t.json: sessions.shared_memory: expected a size of at least 64M (or 0: a memory cgroup for each session), got \"63M\"" },
	{ "{'sessions': {'shared_memory': 'lots'}}", "policy t.json: sessions.shared_memory: expected a size such as 512M, got \"lots\"" },
	/* identity */
	{ "{'identity': 1000}", "policy t.json: identity: expected an object, got 1000" },
	{ "{'identity': {'uid': 0}}", "policy t.json: identity.uid: expected an integer from 1 to 65534, got 0" },
	{ "{'identity': {'uid': 70000}}", "policy t.json: identity.uid: expected an integer from 1 to 65534, got 70000" },
	{ "{'identity': {'uid': '1000'}}", "policy t.json: identity.uid: expected an integer from 1 to 65534, got \"1000\"" },
	{ "{'identity': {'gid': -1}}", "policy t.json: identity.gid: expected an integer from 1 to 65534, got -1" },
	{ "{'identity': {'hostname': ''}}", "policy t.json: identity.hostname: expected a host name of letters, digits, '-' and '.' (at most 64), got \"\"" },
	{ "{'identity': {'hostname': 'my host'}}", "policy t.json: identity.hostname: expected a host name of letters, digits, '-' and '.' (at most 64), got \"my host\"" },
	{ "{'identity': {'hostname': '-x'}}", "policy t.json: identity.hostname: expected a host name of letters, digits, '-' and '.' (at most 64), got \"-x\"" },
	{ "{'identity': {'hostname': 'a..b'}}", "policy t.json: identity.hostname: expected a host name of letters, digits, '-' and '.' (at most 64), got \"a..b\"" },
	{ "{'identity': {'hostname': 'aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa'}}", "policy t.json: identity.hostname: expected a host name of letters, digits, '-' and '.' (at most 64), got \"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa..." },
	{ "{'identity': {'hostname': 5}}", "policy t.json: identity.hostname: expected a host name of letters, digits, '-' and '.' (at most 64), got 5" },
	/* extends (the ones that need no files) */
	{ "{'extends': 5}", "policy t.json: extends: expected a policy name ([a-z0-9_-]+) or a path (containing / or ending in .json), got 5" },
	{ "{'extends': 'Default'}", "policy t.json: extends: expected a policy name ([a-z0-9_-]+) or a path (containing / or ending in .json), got \"Default\"" },
	{ "{'extends': ''}", "policy t.json: extends: expected a policy name ([a-z0-9_-]+) or a path (containing / or ending in .json), got \"\"" },
	{ "{'extends': '/nonexistent/base.json'}", "policy t.json: extends: cannot read /nonexistent/base.json: No such file or directory" },
};

START_TEST(test_bad)
{
	cleanup_free char *json = jq(bad[_i].json);
	struct policy p;
	struct pc_err err = { 0 };
	int rc = policy_parse(json, "t.json", &p, &err);
	if (rc == 0)
		policy_free(&p);
	ck_assert_msg(rc == -1, "accepted: %s", json);
	ck_assert_msg(strcmp(err.msg, bad[_i].msg) == 0, "%s\n  got:      %s\n  expected: %s", json, err.msg,
		      bad[_i].msg);
	ck_assert_str_eq(err.step, "policy");
}
END_TEST

static void expect_error(const char *json, const char *msg)
{
	cleanup_free char *j = jq(json);
	struct policy p;
	struct pc_err err = { 0 };
	int rc = policy_parse(j, "t.json", &p, &err);
	if (rc == 0)
		policy_free(&p);
	ck_assert_msg(rc == -1, "accepted: %s", j);
	ck_assert_msg(strcmp(err.msg, msg) == 0, "%s\n  got:      %s\n  expected: %s", j, err.msg, msg);
}

START_TEST(test_unknown_group)
{
	char list[400] = "", msg[600];
	size_t used = 0;
	for (size_t i = 0; seccomp_group_names[i]; i++)
		used += (size_t)snprintf(list + used, sizeof(list) - used, "%s%s", i ? ", " : "",
					 seccomp_group_names[i]);
	ck_assert_msg(seccomp_group_names[0] != NULL, "seccomp_group_names is empty");
	snprintf(msg, sizeof(msg), "policy t.json: seccomp.groups[0]: unknown seccomp group \"nope\" (expected one of %s)", list);
	expect_error("{'seccomp': {'groups': ['nope']}}", msg);
	snprintf(msg, sizeof(msg), "policy t.json: seccomp.groups[1]: unknown seccomp group \"Base\" (expected one of %s)", list);
	expect_error("{'seccomp': {'groups': ['base', 'Base']}}", msg);
	snprintf(msg, sizeof(msg), "policy t.json: seccomp.groups[1]: \"%s\" is listed twice", seccomp_group_names[0]);
	{
		cleanup_free char *doc = xasprintf("{'seccomp': {'groups': ['%s', '%s']}}", seccomp_group_names[0],
						   seccomp_group_names[0]);
		expect_error(doc, msg);
	}
}
END_TEST

/* ------------------------------------------------------------ good files */

static void parse_ok(const char *json, struct policy *p)
{
	cleanup_free char *j = jq(json);
	struct pc_err err = { 0 };
	ck_assert_msg(policy_parse(j, "t.json", p, &err) == 0, "%s: %s", j, err.msg);
}

START_TEST(test_empty_is_default)
{
	struct policy p, d;
	parse_ok("{}", &p);
	policy_init_default(&d);
	free(d.description);
	d.description = NULL;   /* not inherited from the built-in base */
	ck_assert(policy_equal(&p, &d));
	ck_assert_str_eq(p.name, "t");
	ck_assert_ptr_null(p.path);
	policy_free(&p);
	policy_free(&d);
}
END_TEST

START_TEST(test_default_values)
{
	struct policy d;
	policy_init_default(&d);
	ck_assert_str_eq(d.name, "default");
	ck_assert_uint_eq(d.limits.timeout_ms, 30000);
	ck_assert_uint_eq(d.limits.memory_bytes, 512ULL << 20);
	ck_assert_uint_eq(d.limits.cpu_millis, 1000);
	ck_assert_uint_eq(d.limits.pids, 64);
	ck_assert_uint_eq(d.limits.output_bytes, 1 << 20);
	ck_assert_uint_eq(d.limits.tmp_bytes, 64 << 20);
	ck_assert_uint_eq(d.limits.workspace_bytes, 64 << 20);
	ck_assert_uint_eq(d.limits.file_bytes, 0);   /* no file-size rlimit by default */
	ck_assert_uint_eq(d.limits.open_files, 256);
	ck_assert_uint_eq(d.n_binds, 0);
	ck_assert(!d.ca_certificates);
	ck_assert(d.dev_shm);
	ck_assert_int_eq(d.network.mode, NET_LOOPBACK);   /* a private loopback by default */
	ck_assert_str_eq(d.python, DEFAULT_PYTHON);
	ck_assert_uint_eq(d.n_python_flags, 0);
	ck_assert_uint_eq(d.n_env, 0);
	ck_assert_uint_eq(d.n_tools_allow, 0);
	ck_assert_uint_eq(d.tools_budget, 50);
	ck_assert_uint_eq(d.tools_arg_bytes, 64 << 10);
	ck_assert_uint_eq(d.tools_result_bytes, 1 << 20);
	ck_assert_str_eq(d.backend, "native");
	ck_assert_uint_eq(d.jail_uid, 1000);
	ck_assert_uint_eq(d.jail_gid, 1000);
	ck_assert_str_eq(d.hostname, "pycell");
	policy_free(&d);
}
END_TEST

static const char full[] =
	"{'description': 'everything set',"
	" 'limits': {'timeout': 2.5, 'memory': 268435456, 'cpu': 0.25, 'pids': 0, 'output': '1536',"
	"            'tmp': '1.5G', 'workspace': '3M', 'file_size': 0, 'open_files': 16},"
	" 'filesystem': {'binds': ['/opt/venv', {'src': '/srv/data', 'dst': '/data', 'optional': true,"
	"                          'writable': true}], 'ca_certificates': true, 'dev_shm': false},"
	" 'network': 'loopback',"
	" 'seccomp': {'rules': [{'syscall': 'ptrace', 'action': 'kill'},"
	"                       {'syscall': 'uname', 'action': 'allow'},"
	"                       {'syscall': 'mkdir', 'action': 'errno:EACCES'},"
	"                       {'syscall': 'rmdir', 'action': 'errno:13'}]},"
	" 'python': {'interpreter': '/opt/venv/bin/python', 'flags': ['-B', '-X', 'utf8', '-Wignore', '-sS'],"
	"            'env': {'LANG': 'C.UTF-8', 'EMPTY': '', 'EQ': 'a=b'}},"
	" 'tools': {'allow': ['memory.*', 'fs.read_file', 'db-1.Query.v2'], 'budget': 0,"
	"           'max_argument_bytes': '1K', 'max_result_bytes': 65536},"
	" 'backend': 'native',"
	" 'identity': {'uid': 65534, 'gid': 1, 'hostname': 'box-1.example'}}";

START_TEST(test_full_values)
{
	struct policy p;
	parse_ok(full, &p);
	ck_assert_str_eq(p.description, "everything set");
	ck_assert_uint_eq(p.limits.timeout_ms, 2500);
	ck_assert_uint_eq(p.limits.memory_bytes, 268435456);
	ck_assert_uint_eq(p.limits.cpu_millis, 250);
	ck_assert_uint_eq(p.limits.pids, 0);
	ck_assert_uint_eq(p.limits.output_bytes, 1536);
	ck_assert_uint_eq(p.limits.tmp_bytes, 1536ULL << 20);
	ck_assert_uint_eq(p.limits.workspace_bytes, 3 << 20);
	ck_assert_uint_eq(p.limits.file_bytes, 0);
	ck_assert_uint_eq(p.limits.open_files, 16);
	ck_assert_uint_eq(p.n_binds, 2);
	ck_assert_str_eq(p.binds[0].src, "/opt/venv");
	ck_assert_str_eq(p.binds[0].dst, "/opt/venv");
	ck_assert(!p.binds[0].optional && !p.binds[0].writable);
	ck_assert_str_eq(p.binds[1].src, "/srv/data");
	ck_assert_str_eq(p.binds[1].dst, "/data");
	ck_assert(p.binds[1].optional && p.binds[1].writable);
	ck_assert(p.ca_certificates);
	ck_assert(!p.dev_shm);
	ck_assert_int_eq(p.network.mode, NET_LOOPBACK);
	ck_assert_uint_eq(p.n_seccomp_rules, 4);
	ck_assert_str_eq(p.seccomp_rules[0].syscall, "ptrace");
	ck_assert(p.seccomp_rules[0].kill);
	ck_assert_int_eq(p.seccomp_rules[1].action_errno, 0);
	ck_assert(!p.seccomp_rules[1].kill);
	ck_assert_int_eq(p.seccomp_rules[2].action_errno, EACCES);
	ck_assert_int_eq(p.seccomp_rules[3].action_errno, 13);
	ck_assert_str_eq(p.python, "/opt/venv/bin/python");
	ck_assert_uint_eq(p.n_python_flags, 5);
	ck_assert_str_eq(p.python_flags[2], "utf8");
	ck_assert_uint_eq(p.n_env, 3);
	ck_assert_str_eq(p.env[0], "LANG=C.UTF-8");
	ck_assert_str_eq(p.env[1], "EMPTY=");
	ck_assert_str_eq(p.env[2], "EQ=a=b");
	ck_assert_uint_eq(p.n_tools_allow, 3);
	ck_assert_str_eq(p.tools_allow[2], "db-1.Query.v2");
	ck_assert_uint_eq(p.tools_budget, 0);
	ck_assert_uint_eq(p.tools_arg_bytes, 1024);
	ck_assert_uint_eq(p.tools_result_bytes, 65536);
	ck_assert_str_eq(p.backend, "native");
	ck_assert_uint_eq(p.jail_uid, 65534);
	ck_assert_uint_eq(p.jail_gid, 1);
	ck_assert_str_eq(p.hostname, "box-1.example");
	policy_free(&p);
}
END_TEST

/* parse -> to_json -> parse gives an equal struct, and to_json is stable. */
static void round_trip(const struct policy *p)
{
	struct policy q;
	struct pc_err err = { 0 };
	json_t *j1 = policy_to_json(p), *j2;
	cleanup_free char *s1 = json_dumps(j1, JSON_INDENT(2));
	cleanup_free char *s2 = NULL;
	ck_assert_msg(policy_parse(s1, "round-trip.json", &q, &err) == 0, "%s\n%s", err.msg, s1);
	ck_assert_msg(policy_equal(p, &q), "not equal after a round trip:\n%s", s1);
	j2 = policy_to_json(&q);
	s2 = json_dumps(j2, JSON_INDENT(2));
	ck_assert_str_eq(s1, s2);
	json_decref(j1);
	json_decref(j2);
	policy_free(&q);
}

/* sessions.shared_memory: 0 (the default) or a size of 64M and up */
START_TEST(test_shared_memory_values)
{
	struct policy p;
	parse_ok("{}", &p);
	ck_assert_uint_eq(p.sessions.shared_memory_bytes, 0);
	policy_free(&p);
	parse_ok("{'sessions': {'shared_memory': '20G'}}", &p);
	ck_assert_uint_eq(p.sessions.shared_memory_bytes, 20ULL << 30);
	round_trip(&p);
	policy_free(&p);
	parse_ok("{'sessions': {'shared_memory': '64M'}}", &p);
	ck_assert_uint_eq(p.sessions.shared_memory_bytes, 64ULL << 20);
	policy_free(&p);
	parse_ok("{'sessions': {'shared_memory': 0}}", &p);
	ck_assert_uint_eq(p.sessions.shared_memory_bytes, 0);
	policy_free(&p);
}
END_TEST

START_TEST(test_round_trip)
{
	struct policy p;
	policy_init_default(&p);
	round_trip(&p);
	policy_free(&p);
	parse_ok(full, &p);
	round_trip(&p);
	policy_free(&p);
	parse_ok("{'limits': {'timeout': 0, 'memory': 0, 'cpu': 0, 'pids': 0, 'file_size': 0,"
		 " 'output': 1025, 'tmp': '1.25M', 'workspace': '2G'}}", &p);
	round_trip(&p);
	policy_free(&p);
	parse_ok("{'network': {'egress': ['API.Example.com:443', '10.20.0.0/16:5432', '192.0.2.7:*']}}", &p);
	ck_assert_int_eq(p.network.mode, NET_EGRESS);
	ck_assert_uint_eq(p.network.n_egress, 3);
	ck_assert_str_eq(p.network.egress[0], "API.Example.com:443");   /* as written; matched in lower case */
	round_trip(&p);
	/* a later "none" drops the list */
	policy_set_network(&p, NET_NONE);
	ck_assert_uint_eq(p.network.n_egress, 0);
	ck_assert_ptr_null(p.network.egress);
	round_trip(&p);
	policy_free(&p);
}
END_TEST

START_TEST(test_egress_destinations)
{
	struct egress_dest d;
	const char *why = NULL;
	ck_assert_int_eq(policy_egress_parse("API.Example.com:443", &d, &why), 0);
	ck_assert_str_eq(d.name, "api.example.com");
	ck_assert_uint_eq(d.port, 443);
	ck_assert_int_eq(policy_egress_parse("10.20.0.0/16:5432", &d, &why), 0);
	ck_assert_str_eq(d.name, "");
	ck_assert_uint_eq(d.addr, htonl(0x0a140000));
	ck_assert_uint_eq(d.mask, htonl(0xffff0000));
	ck_assert_uint_eq(d.prefix, 16);
	ck_assert_uint_eq(d.port, 5432);
	ck_assert_int_eq(policy_egress_parse("192.0.2.7:*", &d, &why), 0);
	ck_assert_uint_eq(d.addr, htonl(0xc0000207));
	ck_assert_uint_eq(d.mask, 0xffffffffu);
	ck_assert_uint_eq(d.port, 0);
	ck_assert_int_eq(policy_egress_parse("0.0.0.0/0:80", &d, &why), 0);
	ck_assert_uint_eq(d.mask, 0);
	ck_assert_int_eq(policy_egress_parse("under_score.test:1", &d, &why), 0);
	ck_assert_int_eq(policy_egress_parse("a.test.:1", &d, &why), -1);   /* no empty label, no trailing dot */
	ck_assert_int_eq(policy_egress_parse("1.2.3.4.5:1", &d, &why), -1);
	ck_assert_str_eq(why, "not an IPv4 address (four numbers from 0 to 255)");
}
END_TEST

START_TEST(test_to_json_units)
{
	struct policy p;
	json_t *j, *l;
	parse_ok("{'limits': {'timeout': 0.25, 'memory': '1536M', 'output': 1500, 'cpu': 1.5}}", &p);
	j = policy_to_json(&p);
	l = json_object_get(j, "limits");
	ck_assert_str_eq(json_string_value(json_object_get(l, "timeout")), "250ms");
	ck_assert_str_eq(json_string_value(json_object_get(l, "memory")), "1536M");
	ck_assert_int_eq(json_integer_value(json_object_get(l, "output")), 1500);
	ck_assert_str_eq(json_string_value(json_object_get(l, "tmp")), "64M");
	ck_assert(json_real_value(json_object_get(l, "cpu")) == 1.5);
	ck_assert_ptr_null(json_object_get(j, "extends"));
	json_decref(j);
	policy_free(&p);
}
END_TEST

START_TEST(test_accepted_forms)
{
	struct policy p;
	parse_ok("{'limits': {'timeout': '2m', 'memory': '1GiB', 'cpu': 2, 'tmp': 1048576}}", &p);
	ck_assert_uint_eq(p.limits.timeout_ms, 120000);
	ck_assert_uint_eq(p.limits.memory_bytes, 1ULL << 30);
	ck_assert_uint_eq(p.limits.cpu_millis, 2000);
	ck_assert_uint_eq(p.limits.tmp_bytes, 1 << 20);
	policy_free(&p);
	parse_ok("{'limits': {'timeout': '10ms', 'memory': '16M', 'cpu': 0.01, 'pids': 2, 'output': '1K',"
		 " 'file_size': '4K', 'open_files': 1048576}}", &p);
	ck_assert_uint_eq(p.limits.timeout_ms, 10);
	ck_assert_uint_eq(p.limits.memory_bytes, 16 << 20);
	ck_assert_uint_eq(p.limits.cpu_millis, 10);
	ck_assert_uint_eq(p.limits.pids, 2);
	policy_free(&p);
	parse_ok("{'limits': {'timeout': '24h', 'cpu': 1024, 'pids': 4194304, 'output': '1G'}}", &p);
	ck_assert_uint_eq(p.limits.timeout_ms, 86400000);
	ck_assert_uint_eq(p.limits.cpu_millis, 1024000);
	policy_free(&p);
	parse_ok("{'seccomp': {'groups': [], 'rules': []}, 'python': {'flags': ['-W', 'error', '-Xdev']}}", &p);
	ck_assert_uint_eq(p.n_seccomp_groups, 0);
	ck_assert_uint_eq(p.n_python_flags, 3);
	policy_free(&p);
}
END_TEST

/* ------------------------------------------------------------ files */

START_TEST(test_default_json_equals_builtin)
{
	cleanup_free char *path = xasprintf("%s/policy/default.json", unit_srcdir());
	struct policy file, builtin;
	struct pc_err err = { 0 };
	ck_assert_msg(policy_load(path, &file, &err) == 0, "%s", err.msg);
	policy_init_default(&builtin);
	ck_assert_msg(policy_equal(&file, &builtin), "policy/default.json differs from policy_init_default()");
	ck_assert_str_eq(file.name, "default");
	ck_assert_str_eq(file.path, path);
	policy_free(&file);
	policy_free(&builtin);
}
END_TEST

static const char *const shipped[] = { "default", "strict", "loopback", "data" };

START_TEST(test_shipped_round_trip)
{
	struct policy p;
	struct pc_err err = { 0 };
	setenv("PYCELL_DATADIR", unit_srcdir(), 1);
	ck_assert_msg(policy_load(shipped[_i], &p, &err) == 0, "%s: %s", shipped[_i], err.msg);
	ck_assert_str_eq(p.name, shipped[_i]);
	ck_assert_ptr_nonnull(p.path);
	ck_assert_ptr_nonnull(p.description);
	round_trip(&p);
	policy_free(&p);
}
END_TEST

START_TEST(test_strict_is_stricter)
{
	struct policy s, d;
	struct pc_err err = { 0 };
	setenv("PYCELL_DATADIR", unit_srcdir(), 1);
	ck_assert_msg(policy_load("strict", &s, &err) == 0, "%s", err.msg);
	policy_init_default(&d);
	ck_assert_uint_eq(s.limits.memory_bytes, 128 << 20);
	ck_assert_uint_eq(s.limits.timeout_ms, 5000);
	ck_assert_uint_eq(s.limits.pids, 16);
	ck_assert(s.limits.cpu_millis < d.limits.cpu_millis);
	ck_assert(s.limits.output_bytes < d.limits.output_bytes);
	ck_assert(s.limits.tmp_bytes < d.limits.tmp_bytes);
	ck_assert(s.limits.open_files < d.limits.open_files);
	ck_assert(!s.dev_shm);
	ck_assert_int_eq(s.network.mode, NET_NONE);
	ck_assert_uint_eq(s.tools_budget, 0);
	/* a strict subset of the default groups */
	ck_assert(s.n_seccomp_groups < d.n_seccomp_groups);
	for (size_t i = 0; i < s.n_seccomp_groups; i++) {
		size_t j = 0;
		while (j < d.n_seccomp_groups && strcmp(d.seccomp_groups[j], s.seccomp_groups[i]) != 0)
			j++;
		ck_assert_msg(j < d.n_seccomp_groups, "strict has group %s that default lacks", s.seccomp_groups[i]);
	}
	policy_free(&s);
	policy_free(&d);
}
END_TEST

START_TEST(test_loopback_is_default_plus_network)
{
	struct policy l, d;
	struct pc_err err = { 0 };
	setenv("PYCELL_DATADIR", unit_srcdir(), 1);
	ck_assert_msg(policy_load("loopback", &l, &err) == 0, "%s", err.msg);
	policy_init_default(&d);
	ck_assert_int_eq(l.network.mode, NET_LOOPBACK);
	d.network.mode = NET_LOOPBACK;
	free(d.description);
	d.description = xstrdup(l.description);
	ck_assert(policy_equal(&l, &d));
	policy_free(&l);
	policy_free(&d);
}
END_TEST

START_TEST(test_search_path)
{
	const char *const *d;
	setenv("PYCELL_DATADIR", "/some/where", 1);
	d = policy_search_path();
	ck_assert_str_eq(d[0], PYCELL_SYSCONFDIR "/policy.d");
	ck_assert_str_eq(d[1], "/some/where/policy");
	ck_assert_ptr_null(d[2]);
}
END_TEST

START_TEST(test_names)
{
	ck_assert(policy_is_name("default"));
	ck_assert(policy_is_name("my_policy-2"));
	ck_assert(!policy_is_name(""));
	ck_assert(!policy_is_name("Default"));
	ck_assert(!policy_is_name("a.b"));
	ck_assert(!policy_is_name("a b"));
	ck_assert(!policy_is_name("aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"));
	ck_assert(policy_is_path("p.json"));
	ck_assert(policy_is_path("./p"));
	ck_assert(policy_is_path("/etc/pycell/policy.d/x.json"));
	ck_assert(!policy_is_path("default"));
	ck_assert(!policy_is_path(".json"));
}
END_TEST

START_TEST(test_load_errors)
{
	struct policy p;
	struct pc_err err = { 0 };
	cleanup_free char *dir = unit_mkdtemp();
	cleanup_free char *msg = NULL;
	cleanup_free char *nul = NULL;

	setenv("PYCELL_DATADIR", dir, 1);
	ck_assert_int_eq(policy_load("Bad Name", &p, &err), -1);
	ck_assert_str_eq(err.msg, "policy \"Bad Name\": expected a policy name ([a-z0-9_-]+) or a path (containing / or ending in .json)");
	ck_assert_int_eq(err.errnum, EINVAL);

	ck_assert_int_eq(policy_load("nosuch", &p, &err), -1);
	msg = xasprintf("policy \"nosuch\": not found in %s/policy.d or %s/policy", PYCELL_SYSCONFDIR, dir);
	ck_assert_str_eq(err.msg, msg);
	ck_assert_int_eq(err.errnum, ENOENT);

	ck_assert_int_eq(policy_load("/nonexistent/p.json", &p, &err), -1);
	ck_assert_str_eq(err.msg, "policy /nonexistent/p.json: cannot read: No such file or directory");
	ck_assert_int_eq(err.errnum, ENOENT);

	ck_assert_int_eq(policy_load(dir, &p, &err), -1);
	free(msg);
	msg = xasprintf("policy %s: cannot read: Is a directory", dir);
	ck_assert_str_eq(err.msg, msg);

	nul = xasprintf("%s/nul.json", dir);
	{
		FILE *f = fopen(nul, "w");
		fwrite("{}\0{}", 1, 5, f);
		fclose(f);
	}
	ck_assert_int_eq(policy_load(nul, &p, &err), -1);
	free(msg);
	msg = xasprintf("policy %s: file contains a NUL byte", nul);
	ck_assert_str_eq(err.msg, msg);
	unit_rmtree(dir);
}
END_TEST

START_TEST(test_load_builtin_default)
{
	/* no default.json anywhere: the built-in policy, which equals it */
	struct policy p, d;
	struct pc_err err = { 0 };
	cleanup_free char *dir = unit_mkdtemp();
	setenv("PYCELL_DATADIR", dir, 1);
	ck_assert_msg(policy_load("default", &p, &err) == 0, "%s", err.msg);
	policy_init_default(&d);
	ck_assert(policy_equal(&p, &d));
	ck_assert_ptr_null(p.path);
	policy_free(&p);
	ck_assert_msg(policy_load(NULL, &p, &err) == 0, "%s", err.msg);
	ck_assert(policy_equal(&p, &d));
	ck_assert_ptr_null(p.path);
	policy_free(&p);
	policy_free(&d);
	unit_rmtree(dir);
}
END_TEST

START_TEST(test_load_by_name_and_path)
{
	struct policy p;
	struct pc_err err = { 0 };
	cleanup_free char *dir = unit_mkdtemp();
	cleanup_free char *pdir = xasprintf("%s/policy", dir);
	cleanup_free char *path = NULL;
	ck_assert_int_eq(mkdir(pdir, 0755), 0);
	path = unit_write(pdir, "my-pol.json", "{\"limits\": {\"pids\": 7}}");
	setenv("PYCELL_DATADIR", dir, 1);
	ck_assert_msg(policy_load("my-pol", &p, &err) == 0, "%s", err.msg);
	ck_assert_str_eq(p.name, "my-pol");
	ck_assert_str_eq(p.path, path);
	ck_assert_uint_eq(p.limits.pids, 7);
	policy_free(&p);
	ck_assert_msg(policy_load(path, &p, &err) == 0, "%s", err.msg);
	ck_assert_str_eq(p.name, "my-pol");
	policy_free(&p);
	/* the error names the file it is in */
	free(path);
	path = unit_write(pdir, "bad.json", "{\n  \"limits\": {\n    \"memory\": \"lots\"\n  }\n}\n");
	ck_assert_int_eq(policy_load("bad", &p, &err), -1);
	{
		cleanup_free char *msg = xasprintf("policy %s: limits.memory: expected a size such as 512M, got \"lots\"", path);
		ck_assert_str_eq(err.msg, msg);
	}
	free(path);
	path = unit_write(pdir, "syntax.json", "{\n  \"limits\": {\n    \"memory\": 1,,\n  }\n}\n");
	ck_assert_int_eq(policy_load(path, &p, &err), -1);
	{
		cleanup_free char *msg = xasprintf("policy %s:3:17: invalid JSON: string or '}' expected near ','", path);
		ck_assert_str_eq(err.msg, msg);
	}
	unit_rmtree(dir);
}
END_TEST

/* ------------------------------------------------------------ extends */

START_TEST(test_extends_overrides)
{
	struct policy p;
	struct pc_err err = { 0 };
	cleanup_free char *dir = unit_mkdtemp();
	cleanup_free char *base = unit_write(dir, "base.json",
		"{\"description\": \"base\", \"limits\": {\"memory\": \"1G\", \"pids\": 10},"
		" \"filesystem\": {\"binds\": [\"/opt/a\", \"/opt/b\"]},"
		" \"python\": {\"flags\": [\"-B\"], \"env\": {\"A\": \"1\", \"B\": \"2\"}},"
		" \"tools\": {\"allow\": [\"memory.*\"], \"budget\": 5}}");
	cleanup_free char *sub = xasprintf("%s/sub", dir);
	cleanup_free char *child = NULL;
	ck_assert_int_eq(mkdir(sub, 0755), 0);
	/* relative to the extending file's directory */
	child = unit_write(sub, "child.json",
		"{\"extends\": \"../base.json\", \"limits\": {\"pids\": 20},"
		" \"filesystem\": {\"binds\": [\"/opt/c\"]},"
		" \"python\": {\"env\": {\"B\": \"3\", \"C\": \"4\"}}, \"network\": \"loopback\"}");
	ck_assert_msg(policy_load(child, &p, &err) == 0, "%s", err.msg);
	ck_assert_str_eq(p.name, "child");
	ck_assert_uint_eq(p.limits.memory_bytes, 1ULL << 30);   /* inherited */
	ck_assert_uint_eq(p.limits.pids, 20);                    /* overridden */
	ck_assert_uint_eq(p.limits.timeout_ms, 30000);           /* built-in default */
	ck_assert_uint_eq(p.n_binds, 1);                          /* arrays replace */
	ck_assert_str_eq(p.binds[0].src, "/opt/c");
	ck_assert_uint_eq(p.n_python_flags, 1);
	ck_assert_uint_eq(p.n_env, 3);                            /* env merges by key */
	ck_assert_str_eq(p.env[0], "A=1");
	ck_assert_str_eq(p.env[1], "B=3");
	ck_assert_str_eq(p.env[2], "C=4");
	ck_assert_uint_eq(p.n_tools_allow, 1);
	ck_assert_uint_eq(p.tools_budget, 5);
	ck_assert_int_eq(p.network.mode, NET_LOOPBACK);
	ck_assert_ptr_null(p.description);                         /* not inherited */
	round_trip(&p);
	policy_free(&p);
	unit_rmtree(dir);
}
END_TEST

START_TEST(test_extends_shipped_name)
{
	struct policy p, d;
	setenv("PYCELL_DATADIR", unit_srcdir(), 1);
	parse_ok("{'extends': 'strict', 'limits': {'memory': '256M'}}", &p);
	ck_assert_uint_eq(p.limits.memory_bytes, 256 << 20);
	ck_assert_uint_eq(p.limits.pids, 16);
	policy_free(&p);
	parse_ok("{'extends': 'default', 'limits': {'pids': 99}}", &p);
	policy_init_default(&d);
	d.limits.pids = 99;
	free(d.description);
	d.description = NULL;
	ck_assert(policy_equal(&p, &d));
	policy_free(&p);
	policy_free(&d);
}
END_TEST

START_TEST(test_extends_errors)
{
	struct policy p;
	struct pc_err err = { 0 };
	cleanup_free char *dir = unit_mkdtemp();
	cleanup_free char *a = unit_write(dir, "a.json", "{\"extends\": \"b.json\"}");
	cleanup_free char *b = unit_write(dir, "b.json", "{\"extends\": \"a.json\"}");
	cleanup_free char *self = unit_write(dir, "self.json", "{\"extends\": \"self.json\"}");
	cleanup_free char *badbase = unit_write(dir, "badbase.json", "{\"network\": \"host\"}");
	cleanup_free char *usebad = unit_write(dir, "usebad.json", "{\"extends\": \"badbase.json\"}");
	cleanup_free char *msg = NULL;

	ck_assert_int_eq(policy_load(a, &p, &err), -1);
	msg = xasprintf("policy %s: extends: cycle: %s is already being loaded", b, a);
	ck_assert_str_eq(err.msg, msg);

	ck_assert_int_eq(policy_load(self, &p, &err), -1);
	free(msg);
	msg = xasprintf("policy %s: extends: cycle: %s is already being loaded", self, self);
	ck_assert_str_eq(err.msg, msg);

	/* an error in the base names the base file */
	ck_assert_int_eq(policy_load(usebad, &p, &err), -1);
	free(msg);
	msg = xasprintf("policy %s: network: expected \"none\" or \"loopback\", got \"host\"", badbase);
	ck_assert_str_eq(err.msg, msg);

	setenv("PYCELL_DATADIR", dir, 1);
	free(msg);
	msg = xasprintf("policy t.json: extends: no policy named \"nosuch\" in %s/policy.d or %s/policy",
			PYCELL_SYSCONFDIR, dir);
	expect_error("{'extends': 'nosuch'}", msg);
	unit_rmtree(dir);
}
END_TEST

START_TEST(test_extends_depth)
{
	struct policy p;
	struct pc_err err = { 0 };
	cleanup_free char *dir = unit_mkdtemp();
	cleanup_free char *msg = NULL;
	char name[32], text[64];
	/* p0 extends p1 ... extends pN: 8 levels are fine, 9 are not */
	for (int i = 0; i <= 9; i++) {
		snprintf(name, sizeof(name), "p%d.json", i);
		snprintf(text, sizeof(text), "{\"extends\": \"p%d.json\", \"limits\": {\"pids\": %d}}", i + 1, 100 + i);
		free(unit_write(dir, name, text));
	}
	free(unit_write(dir, "p9.json", "{\"limits\": {\"pids\": 109}}"));
	{
		cleanup_free char *p1 = xasprintf("%s/p1.json", dir);
		ck_assert_msg(policy_load(p1, &p, &err) == 0, "%s", err.msg);
		ck_assert_uint_eq(p.limits.pids, 101);
		policy_free(&p);
	}
	{
		cleanup_free char *p0 = xasprintf("%s/p0.json", dir);
		ck_assert_int_eq(policy_load(p0, &p, &err), -1);
		msg = xasprintf("policy %s/p8.json: extends: more than 8 levels of \"extends\"", dir);
		ck_assert_str_eq(err.msg, msg);
	}
	unit_rmtree(dir);
}
END_TEST

START_TEST(test_extends_skips_self)
{
	/* an admin's policy.d/default.json may extend the shipped default: a
	 * name never resolves to the file that asks for it */
	struct policy p;
	struct pc_err err = { 0 };
	cleanup_free char *dir = unit_mkdtemp();
	cleanup_free char *pdir = xasprintf("%s/policy", dir);
	ck_assert_int_eq(mkdir(pdir, 0755), 0);
	free(unit_write(pdir, "default.json", "{\"extends\": \"default\", \"limits\": {\"pids\": 33}}"));
	setenv("PYCELL_DATADIR", dir, 1);
	ck_assert_msg(policy_load("default", &p, &err) == 0, "%s", err.msg);
	ck_assert_uint_eq(p.limits.pids, 33);
	ck_assert_uint_eq(p.limits.memory_bytes, 512 << 20);
	policy_free(&p);
	unit_rmtree(dir);
}
END_TEST

/* ------------------------------------------------------------ the table of fields */

/* Every byte of struct policy belongs to a row of the table (a member or
 * its count) or is the padding the compiler puts before a member: a field
 * added to the struct without a row fails here. */
START_TEST(test_table_covers_the_struct)
{
	struct unit_span spans[2 * 64];
	size_t n = 0;
	for (size_t i = 0; i < policy_n_fields; i++) {
		const struct policy_field *f = &policy_fields[i];
		ck_assert_uint_lt(n + 2, ARRAY_SIZE(spans));
		spans[n++] = (struct unit_span){ f->off, f->size, f->align, f->key };
		if (f->cnt_size)
			spans[n++] = (struct unit_span){ f->cnt_off, f->cnt_size, f->cnt_align, f->key };
	}
	unit_check_spans("policy", "policy_fields", spans, n, sizeof(struct policy), __alignof__(struct policy));
}
END_TEST

/* Change row i of p to a value that differs from any default. */
static void mutate(struct policy *p, const struct policy_field *f)
{
	void *v = (char *)p + f->off;
	size_t *cnt = f->cnt_size ? (size_t *)((char *)p + f->cnt_off) : NULL;
	switch (f->type) {
	case PF_STRING:
	case PF_PATH:
	case PF_NAME:
		free(*(char **)v);
		*(char **)v = xstrdup("/changed");
		break;
	case PF_DURATION:
	case PF_SIZE:
		*(uint64_t *)v += 4096;
		break;
	case PF_U32:
	case PF_CPU:
		*(uint32_t *)v += 1;
		break;
	case PF_BOOL:
		*(bool *)v = !*(bool *)v;
		break;
	case PF_ENUM:
		*(int *)v = !*(int *)v;
		break;
	case PF_STRV:
	case PF_ENV:
		jc_strv_free(*(char ***)v, *cnt);
		*(char ***)v = xcalloc(1, sizeof(char *));
		(*(char ***)v)[0] = xstrdup("CHANGED=1");
		*cnt = 1;
		break;
	case PF_BINDS: {
		struct bind_spec *b = xcalloc(*cnt + 1, sizeof(*b));
		if (*cnt)
			memcpy(b, *(struct bind_spec **)v, *cnt * sizeof(*b));
		b[*cnt] = (struct bind_spec){ xstrdup("/opt"), xstrdup("/opt"), true, false };
		free(*(struct bind_spec **)v);
		*(struct bind_spec **)v = b;
		++*cnt;
		break;
	}
	case PF_NETWORK: {
		struct net_policy *np = v;
		jc_strv_free(np->egress, np->n_egress);
		np->egress = xcalloc(1, sizeof(char *));
		np->egress[0] = xstrdup("api.example.com:443");
		np->n_egress = 1;
		np->mode = NET_EGRESS;
		break;
	}
	case PF_RULES: {
		struct seccomp_rule *r = xcalloc(*cnt + 1, sizeof(*r));
		if (*cnt)
			memcpy(r, *(struct seccomp_rule **)v, *cnt * sizeof(*r));
		r[*cnt] = (struct seccomp_rule){ xstrdup("uname"), EPERM, false };
		free(*(struct seccomp_rule **)v);
		*(struct seccomp_rule **)v = r;
		++*cnt;
		break;
	}
	case PF_META:
	default:
		break;
	}
}

/* Each row is compared (a zygote serves only an equal policy), written to
 * JSON, and in the seccomp cache's key exactly when the filter reads it. */
START_TEST(test_every_row_is_compared_written_and_keyed)
{
	const struct policy_field *f = &policy_fields[_i];
	struct policy a, b;
	json_t *ja, *jb, *fa, *fb;
	policy_init_default(&a);
	policy_init_default(&b);
	mutate(&b, f);
	ja = policy_to_json(&a);
	jb = policy_to_json(&b);
	fa = policy_filter_json(&a);
	fb = policy_filter_json(&b);
	if (f->type == PF_META) {
		ck_assert(policy_equal(&a, &b));
	} else {
		ck_assert_msg(!policy_equal(&a, &b), "%s.%s: not compared", f->section ? f->section : "", f->key);
		ck_assert_msg(!json_equal(ja, jb), "%s.%s: not written", f->section ? f->section : "", f->key);
		ck_assert_msg(json_equal(fa, fb) == !(f->flags & PF_FILTER), "%s.%s: cache key %s it",
			      f->section ? f->section : "", f->key, f->flags & PF_FILTER ? "misses" : "has");
	}
	json_decref(ja);
	json_decref(jb);
	json_decref(fa);
	json_decref(fb);
	policy_free(&a);
	policy_free(&b);
}
END_TEST

/* Every key of the table is documented in pycell-policy(5). */
START_TEST(test_every_row_is_in_the_man_page)
{
	cleanup_free char *path = xasprintf("%s/man/pycell-policy.5", unit_srcdir());
	cleanup_free char *man = NULL;
	size_t len;
	ck_assert_msg(read_file(path, 1 << 20, &man, &len) == 0, "read %s", path);
	for (size_t i = 0; i < policy_n_fields; i++) {
		const struct policy_field *f = &policy_fields[i];
		char key[128];
		if (f->type == PF_META)
			continue;
		snprintf(key, sizeof(key), "%s%s%s", f->section ? f->section : "", f->section ? "." : "", f->key);
		ck_assert_msg(strstr(man, key) != NULL, "%s is not in %s", key, path);
		ck_assert_msg(f->doc && *f->doc, "%s has no doc line", key);
	}
}
END_TEST

Suite *policy_suite(void)
{
	Suite *s = suite_create("policy");
	TCase *bad_tc = tcase_create("malformed"), *good = tcase_create("valid"),
	      *files = tcase_create("files"), *ext = tcase_create("extends");
	tcase_add_loop_test(bad_tc, test_bad, 0, (int)ARRAY_SIZE(bad));
	tcase_add_test(bad_tc, test_unknown_group);
	tcase_add_test(good, test_empty_is_default);
	tcase_add_test(good, test_default_values);
	tcase_add_test(good, test_full_values);
	tcase_add_test(good, test_shared_memory_values);
	tcase_add_test(good, test_round_trip);
	tcase_add_test(good, test_egress_destinations);
	tcase_add_test(good, test_to_json_units);
	tcase_add_test(good, test_accepted_forms);
	tcase_add_test(good, test_names);
	tcase_add_test(good, test_table_covers_the_struct);
	tcase_add_loop_test(good, test_every_row_is_compared_written_and_keyed, 0, (int)policy_n_fields);
	tcase_add_test(files, test_every_row_is_in_the_man_page);
	tcase_add_test(files, test_default_json_equals_builtin);
	tcase_add_loop_test(files, test_shipped_round_trip, 0, (int)ARRAY_SIZE(shipped));
	tcase_add_test(files, test_strict_is_stricter);
	tcase_add_test(files, test_loopback_is_default_plus_network);
	tcase_add_test(files, test_search_path);
	tcase_add_test(files, test_load_errors);
	tcase_add_test(files, test_load_builtin_default);
	tcase_add_test(files, test_load_by_name_and_path);
	tcase_add_test(ext, test_extends_overrides);
	tcase_add_test(ext, test_extends_shipped_name);
	tcase_add_test(ext, test_extends_errors);
	tcase_add_test(ext, test_extends_depth);
	tcase_add_test(ext, test_extends_skips_self);
	suite_add_tcase(s, bad_tc);
	suite_add_tcase(s, good);
	suite_add_tcase(s, files);
	suite_add_tcase(s, ext);
	return s;
}
