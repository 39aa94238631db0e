# The supervisor of one local replica (see skyshift/compat/local/proc.py, which starts it as
#   /bin/sh supervisor.sh <replica dir> <cwd> <epoch> <env tool or ""> <argv...>
# in a new session). POSIX sh only: it runs under dash.
#
# It forks the supervisor proper and exits once the pid file is written (the pipe to `read`
# closes): the supervisor is then re-parented to init and survives the worker. Variables are
# prefixed _sk_ and unset before the command runs, so the command's environment is exactly the
# one the launcher was given. pid file: "<supervisor pid> <start ticks> <epoch> <process group>".
# With run_as (skyshift/compat/local/user.py) <argv...> starts with
#   setpriv --reuid=<uid> --regid=<gid> --init-groups --
# so this shell stays root to write pid and exit_code in the private replica dir while the
# command runs as the unprivileged user; <cwd> is then the real path of its working directory.
cd -- "$1" || exit 1
_sk_cwd=$2 _sk_t0=$3 _sk_env=$4
shift 4
{
  {
    exec </dev/null 2>>log
    _sk_ticks=0
    if [ -r /proc/self/stat ]; then
      IFS=' ' read -r _sk_pid _sk_2 _sk_3 _sk_4 _sk_5 _sk_6 _sk_7 _sk_8 _sk_9 _sk_10 _sk_11 _sk_12 _sk_13 _sk_14 _sk_15 _sk_16 _sk_17 _sk_18 _sk_19 _sk_20 _sk_21 _sk_ticks _sk_rest </proc/self/stat
    else
      _sk_pid=$(exec /bin/sh -c 'echo "$PPID"')
    fi
    printf '%s %s %s %s\n' "$_sk_pid" "$_sk_ticks" "$_sk_t0" "$$" >pid.tmp || exit 1
    command -p mv -f pid.tmp pid || exit 1
    exec >/dev/null
    [ -n "$_sk_env" ] && set -- "$_sk_env" --default-signal "$@"
    (cd -- "$_sk_cwd" && unset -v _sk_pid _sk_ticks _sk_rest _sk_cwd _sk_t0 _sk_child _sk_sig _sk_rc _sk_code _sk_x _sk_env _sk_2 _sk_3 _sk_4 _sk_5 _sk_6 _sk_7 _sk_8 _sk_9 _sk_10 _sk_11 _sk_12 _sk_13 _sk_14 _sk_15 _sk_16 _sk_17 _sk_18 _sk_19 _sk_20 _sk_21 && exec "$@") >>log 2>&1 &
    _sk_child=$!
    trap '_sk_sig=1; kill -TERM "$_sk_child" 2>/dev/null' TERM
    trap '_sk_sig=1; kill -HUP "$_sk_child" 2>/dev/null' HUP
    while :; do
      _sk_sig=
      wait "$_sk_child"
      _sk_rc=$?
      if [ -z "$_sk_sig" ]; then _sk_code=$_sk_rc; break; fi
      # a forwarded signal ended the wait: wait again while the command is there
      kill -0 "$_sk_child" 2>/dev/null && continue
      wait "$_sk_child"
      _sk_code=$?
      [ "$_sk_code" = 127 ] && _sk_code=$_sk_rc
      break
    done
    printf '%s\n' "$_sk_code" >exit_code.tmp && command -p mv -f exit_code.tmp exit_code
  } &
} | { read -r _sk_x; }
[ -s pid ]
