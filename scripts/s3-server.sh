#!/usr/bin/env bash
# s3-server.sh: a throw-away S3-compatible server (versitygw, posix backend)
# on loopback, for rewind's S3 storage tests and demos.
#
#   s3-server.sh install      go install versitygw (skipped if already present)
#   s3-server.sh start DIR    start it on a free 127.0.0.1 port, objects in
#                             DIR/data; prints export lines (also in DIR/env),
#                             writes DIR/pid and logs to DIR/log
#   s3-server.sh stop DIR     stop the server started with DIR
#
# Typical use:  eval "$(scripts/s3-server.sh start /tmp/s3)"; go test ...;
#               scripts/s3-server.sh stop /tmp/s3
# Progress and errors go to stderr, so stdout is safe to eval.
#
# Environment: VERSITYGW (path to the binary), ROOT_ACCESS_KEY and
# ROOT_SECRET_KEY (credentials; loopback test defaults otherwise).
set -euo pipefail

readonly VERSITYGW_VERSION=v1.8.0
readonly VERSITYGW_PKG=github.com/versity/versitygw/cmd/versitygw
readonly PROG=${0##*/}

log() { printf '%s: %s\n' "$PROG" "$*" >&2; }
die() { log "error: $*"; exit 1; }

usage() {
	cat >&2 <<EOF
usage: $PROG install | start DIR | stop DIR
  install    go install $VERSITYGW_PKG@$VERSITYGW_VERSION if versitygw is missing
  start DIR  run versitygw on a free loopback port with its objects in DIR/data;
             prints 'export REWIND_S3_ENDPOINT=...' lines (also written to DIR/env)
             and writes the pid to DIR/pid
  stop DIR   stop the server started with DIR
EOF
	exit 2
}

# find_bin prints the versitygw binary to use, or fails.
find_bin() {
	if [[ -n ${VERSITYGW:-} ]]; then
		[[ -x $VERSITYGW ]] || die "VERSITYGW=$VERSITYGW is not an executable file"
		printf '%s\n' "$VERSITYGW"
		return 0
	fi
	if command -v versitygw >/dev/null 2>&1; then
		command -v versitygw
		return 0
	fi
	if command -v go >/dev/null 2>&1; then
		local gobin gopath d
		gobin=$(go env GOBIN)
		if [[ -n $gobin && -x $gobin/versitygw ]]; then
			printf '%s\n' "$gobin/versitygw"
			return 0
		fi
		gopath=$(go env GOPATH)
		local IFS=:
		for d in $gopath; do
			if [[ -x $d/bin/versitygw ]]; then
				printf '%s\n' "$d/bin/versitygw"
				return 0
			fi
		done
	fi
	return 1
}

cmd_install() {
	local bin start
	if bin=$(find_bin); then
		log "versitygw already installed: $bin"
		return 0
	fi
	command -v go >/dev/null 2>&1 || die "go is not in PATH; it is needed to install versitygw"
	log "installing $VERSITYGW_PKG@$VERSITYGW_VERSION"
	log "this takes about 2.5 minutes on a cold module and build cache; each package is listed as it builds"
	start=$SECONDS
	go install -v "$VERSITYGW_PKG@$VERSITYGW_VERSION" ||
		die "go install $VERSITYGW_PKG@$VERSITYGW_VERSION failed (see above)"
	bin=$(find_bin) || die "go install succeeded but versitygw is not in PATH, \$(go env GOBIN) or \$(go env GOPATH)/bin"
	log "installed $bin in $((SECONDS - start))s"
}

# is_versitygw PID: is that process a versitygw? Guards against killing an
# unrelated process that reused a stale pid.
is_versitygw() {
	local comm
	if [[ -r /proc/$1/comm ]]; then
		comm=$(cat "/proc/$1/comm")
	else
		comm=$(ps -p "$1" -o comm= 2>/dev/null || true)
	fi
	[[ ${comm##*/} == versitygw* ]]
}

# port_in_use PORT: does something accept connections on 127.0.0.1:PORT?
port_in_use() {
	(exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null
}

# listens_on PID PORT: is it PID that listens on PORT? Another process can
# take the port between pick_port and versitygw's bind (the range overlaps
# the ephemeral ports); without this check its endpoint would be reported
# as ours, and freezing PID would freeze nothing. Where ss is missing, only
# that something listens can be checked.
listens_on() {
	if command -v ss >/dev/null 2>&1; then
		ss -Hltnp "sport = :$2" 2>/dev/null | grep -q "pid=$1,"
	else
		port_in_use "$2"
	fi
}

pick_port() {
	local port tries=0
	while ((tries < 50)); do
		port=$((20000 + (RANDOM * 32768 + RANDOM) % 40000))
		if ! port_in_use "$port"; then
			printf '%s\n' "$port"
			return 0
		fi
		tries=$((tries + 1))
	done
	die "found no free port on 127.0.0.1 between 20000 and 59999"
}

cmd_start() {
	local dir=$1 bin access secret port pid attempt waited
	mkdir -p "$dir/data" || die "cannot create $dir/data"
	dir=$(cd "$dir" && pwd)
	if [[ -f $dir/pid ]]; then
		pid=$(cat "$dir/pid")
		if [[ $pid =~ ^[0-9]+$ ]] && kill -0 "$pid" 2>/dev/null && is_versitygw "$pid"; then
			die "a server from $dir is already running (pid $pid); run: $PROG stop $dir"
		fi
		rm -f "$dir/pid"
	fi
	bin=$(find_bin) || die "versitygw not found (PATH, GOBIN, GOPATH/bin); run: $PROG install"
	access=${ROOT_ACCESS_KEY:-rewind}
	secret=${ROOT_SECRET_KEY:-rewind-secret-key}

	# The port can be taken between the probe and the bind: retry.
	for attempt in 1 2 3 4 5; do
		port=$(pick_port)
		log "starting $bin on 127.0.0.1:$port (attempt $attempt), objects in $dir/data"
		# A session of its own: a SIGSTOPped server left in the caller's
		# process group is sent SIGCONT by the kernel whenever another
		# member exits while that group is orphaned (POSIX job control),
		# which thawed a "frozen" server in the middle of a test.
		ROOT_ACCESS_KEY=$access ROOT_SECRET_KEY=$secret \
			setsid nohup "$bin" --port "127.0.0.1:$port" --quiet posix "$dir/data" >"$dir/log" 2>&1 </dev/null &
		pid=$!
		waited=0
		while ((waited < 150)); do # 15 s
			if ! kill -0 "$pid" 2>/dev/null; then
				log "versitygw exited during start-up; last log lines:"
				tail -n 5 "$dir/log" >&2 || true
				break
			fi
			if listens_on "$pid" "$port"; then
				printf '%s\n' "$pid" >"$dir/pid"
				{
					printf 'export REWIND_S3_ENDPOINT=http://127.0.0.1:%s\n' "$port"
					printf 'export AWS_ACCESS_KEY_ID=%s\n' "$access"
					printf 'export AWS_SECRET_ACCESS_KEY=%s\n' "$secret"
				} >"$dir/env"
				log "ready after $((waited / 10)).$((waited % 10))s (pid $pid); stop with: $PROG stop $dir"
				cat "$dir/env"
				return 0
			fi
			sleep 0.1
			waited=$((waited + 1))
		done
		if kill -0 "$pid" 2>/dev/null; then
			log "versitygw (pid $pid) did not listen on port $port within 15s; killing it"
			kill -KILL "$pid" 2>/dev/null || true
		fi
		wait "$pid" 2>/dev/null || true
	done
	die "could not start versitygw; see $dir/log"
}

cmd_stop() {
	local dir=$1 pid waited
	if [[ ! -f $dir/pid ]]; then
		log "no $dir/pid: nothing to stop"
		return 0
	fi
	pid=$(cat "$dir/pid")
	[[ $pid =~ ^[0-9]+$ ]] || die "$dir/pid does not hold a pid: '$pid'"
	if ! kill -0 "$pid" 2>/dev/null; then
		log "versitygw (pid $pid) is not running; removing $dir/pid"
		rm -f "$dir/pid"
		return 0
	fi
	is_versitygw "$pid" || die "pid $pid from $dir/pid is not versitygw (stale pid file?); not killing it"
	kill -TERM "$pid"
	waited=0
	while kill -0 "$pid" 2>/dev/null && ((waited < 50)); do # 5 s
		sleep 0.1
		waited=$((waited + 1))
	done
	if kill -0 "$pid" 2>/dev/null; then
		log "versitygw (pid $pid) ignored SIGTERM for 5s; sending SIGKILL"
		kill -KILL "$pid" 2>/dev/null || true
	fi
	rm -f "$dir/pid"
	log "stopped versitygw (pid $pid)"
}

main() {
	(($# >= 1)) || usage
	case $1 in
	install)
		(($# == 1)) || usage
		cmd_install
		;;
	start)
		(($# == 2)) || usage
		cmd_start "$2"
		;;
	stop)
		(($# == 2)) || usage
		cmd_stop "$2"
		;;
	-h | --help | help) usage ;;
	*)
		log "unknown command: $1"
		usage
		;;
	esac
}

main "$@"
