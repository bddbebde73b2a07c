# bash completion for sbfs and sbexec                      -*- shell-script -*-
# Installed as completions/sbfs and completions/sbexec (bash-completion
# loads a file by the command's name). Works without bash-completion too:
# source it from ~/.bashrc.

# The -o options sbfs knows, grouped as in sbfs(1). Those that take a value
# end in '='.
_sbfs_option_names="backend= image= workdir= env= network block_network
allow_egress_to= cpu= memory= sandbox_timeout= idle_timeout= tag= keep
attach= disk= idmap= attr_timeout= dir_timeout= writeback watch nowatch spool_dir= max_nodes= ro noexec noatime allow_other auto_unmount nonempty uid= gid=
call_timeout= log= log_level=
local_root= docker_host= pull pids= app= gpu= region= cloud=
template= ca_file= user= keepalive_timeout=
sbx_path= host_network_policy= create_timeout=
egress_enforcement= shell_ops inject_latency_ms= inject_faults="

# Mountpoints of sbfs mounts, one a line, with mountinfo's octal escapes
# (\040 for a space) decoded.
_sbfs_mounts()
{
    local src mnt type rest
    while read -r src mnt type rest; do
        [[ $type == fuse.sbfs ]] && printf '%b\n' "$mnt"
    done </proc/self/mounts 2>/dev/null
}

# Backend names as this sbfs reports them, after the "Backends:" line of
# its --help; the built-in list if that fails.
_sbfs_backends()
{
    local names
    names=$(sbfs --help 2>/dev/null | sed -n '/^Backends:/,$s/^  \([a-z0-9_]*\) .*/\1/p')
    printf '%s\n' ${names:-local docker modal e2b sbx}
}

# Images the docker engine has, only where that is cheap: a docker CLI that
# answers within a second.
_sbfs_images()
{
    command -v docker >/dev/null 2>&1 || return 0
    timeout 1 docker image ls --format '{{.Repository}}:{{.Tag}}' 2>/dev/null |
        grep -v '<none>'
}

# Mountpoints may hold spaces: let bash quote them as file names.
_sbfs_complete_mounts()
{
    _sbfs_reply_lines "$(_sbfs_mounts)" "$1"
    compopt -o filenames 2>/dev/null
}

# Completes COMPREPLY with the lines of $1 that start with $2, one word each.
_sbfs_reply_lines()
{
    local IFS=$'\n'
    COMPREPLY=($(compgen -W "$1" -- "$2"))
}

# The word being completed is one -o list (a,b,c=...): complete its last
# element, keeping what comes before it.
_sbfs_complete_option_list()
{
    local cur=$1 head= last=$1
    if [[ $cur == *,* ]]; then
        head=${cur%,*},
        last=${cur##*,}
    fi
    local key=${last%%=*} value words
    if [[ $last == *=* ]]; then
        value=${last#*=}
        case $key in
        backend) words=$(_sbfs_backends) ;;
        image) words=$(_sbfs_images) ;;
        egress_enforcement) words=sni ;;
        host_network_policy) words=$'deny-all\nallow-all\nunknown' ;;
        idmap) words=$'user\nnone' ;;
        workdir) words="/workspace" ;;
        spool_dir | local_root | log | ca_file | sbx_path)
            local IFS=$'\n'
            COMPREPLY=($(compgen -f -- "$value"))
            COMPREPLY=("${COMPREPLY[@]/#/$head$key=}")
            compopt -o nospace 2>/dev/null
            return
            ;;
        *) return ;;
        esac
        _sbfs_reply_lines "$words" "$value"
        COMPREPLY=("${COMPREPLY[@]/#/$head$key=}")
        return
    fi
    COMPREPLY=($(compgen -W "$_sbfs_option_names" -- "$last"))
    COMPREPLY=("${COMPREPLY[@]/#/$head}")
    # After a name with '=' the value follows: no space.
    [[ ${COMPREPLY[*]} == *= ]] && compopt -o nospace 2>/dev/null
}

# bash splits a word at the characters of COMP_WORDBREAKS (= and : among
# them), so "backend=lo" reaches us as three words. The -o list is taken
# whole from the line instead, and each reply loses the part of the list
# that bash keeps in front of its own current word.
_sbfs_option_list_word()
{
    local line=${COMP_LINE:0:COMP_POINT}
    local -a words
    read -ra words <<<"$line"
    [[ $line == *[[:space:]] ]] && words+=("")
    local n=${#words[@]}
    [[ $n -ge 2 ]] || return 1
    if [[ ${words[n - 2]} == -o ]]; then
        printf '%s' "${words[n - 1]}"
    elif [[ ${words[n - 1]} == -o?* ]]; then
        printf '%s' "${words[n - 1]#-o}"
    else
        return 1
    fi
}

_sbfs_strip_wordbreak_prefix()
{
    local full=$1 tail=$1 i
    for ((i = ${#full} - 1; i >= 0; i--)); do
        if [[ $COMP_WORDBREAKS == *"${full:i:1}"* ]]; then
            tail=${full:i+1}
            break
        fi
    done
    local strip=${full%"$tail"}
    [[ -n $strip ]] && COMPREPLY=("${COMPREPLY[@]#"$strip"}")
}

_sbfs()
{
    local cur=${COMP_WORDS[COMP_CWORD]}
    local cmd=${COMP_WORDS[1]} list
    COMPREPLY=()
    if list=$(_sbfs_option_list_word); then
        _sbfs_complete_option_list "$list"
        _sbfs_strip_wordbreak_prefix "$list"
        return
    fi
    if [[ $COMP_CWORD -eq 1 ]]; then
        if [[ $cur == -* ]]; then
            COMPREPLY=($(compgen -W "-f -d -o -h --help -V --version" -- "$cur"))
        else
            COMPREPLY=($(compgen -W "status sync refresh sweep umount list destroy" -- "$cur"))
            local IFS=$'\n'
            COMPREPLY+=($(compgen -d -- "$cur"))
            compopt -o filenames 2>/dev/null
        fi
        return
    fi
    case $cmd in
    status)
        if [[ $cur == -* ]]; then
            COMPREPLY=($(compgen -W "--json --watch" -- "$cur"))
        else
            _sbfs_complete_mounts "$cur"
        fi
        ;;
    sync)
        if [[ $cur == -* ]]; then
            COMPREPLY=($(compgen -W "--json --progress" -- "$cur"))
        else
            _sbfs_complete_mounts "$cur"
        fi
        ;;
    umount)
        if [[ $cur == -* ]]; then
            COMPREPLY=($(compgen -W "-l --lazy --json" -- "$cur"))
        else
            _sbfs_complete_mounts "$cur"
        fi
        ;;
    refresh)
        if [[ $COMP_CWORD -eq 2 ]]; then
            _sbfs_complete_mounts "$cur"
        else
            local IFS=$'\n'
            COMPREPLY=($(compgen -f -- "$cur"))
            compopt -o filenames 2>/dev/null
        fi
        ;;
    sweep|destroy)
        COMPREPLY=($(compgen -W "-o" -- "$cur"))
        ;;
    list)
        COMPREPLY=($(compgen -W "--json -o" -- "$cur"))
        ;;
    *)
        if [[ $cur == -* ]]; then
            COMPREPLY=($(compgen -W "-f -d -o" -- "$cur"))
        else
            local IFS=$'\n'
            COMPREPLY=($(compgen -d -- "$cur"))
            compopt -o filenames 2>/dev/null
        fi
        ;;
    esac
}

_sbexec()
{
    local cur=${COMP_WORDS[COMP_CWORD]} prev=${COMP_WORDS[COMP_CWORD - 1]}
    COMPREPLY=()
    case $prev in
    -m | --mount)
        _sbfs_complete_mounts "$cur"
        return
        ;;
    -w | --workdir)
        local IFS=$'\n'
        COMPREPLY=($(compgen -d -- "$cur"))
        return
        ;;
    -T | --timeout | -e | --env)
        return
        ;;
    esac
    # The command starts at the first word that is not an option or an
    # option's value; from there complete as for that command.
    local i=1
    while [[ $i -lt $COMP_CWORD ]]; do
        case ${COMP_WORDS[i]} in
        --) i=$((i + 1)); break ;;
        -m | --mount | -T | --timeout | -e | --env | -w | --workdir) i=$((i + 2)) ;;
        -*) i=$((i + 1)) ;;
        *) break ;;
        esac
    done
    if [[ $i -lt $COMP_CWORD ]]; then
        if declare -F _command_offset >/dev/null; then
            _command_offset "$i"
        else
            local IFS=$'\n'
            COMPREPLY=($(compgen -f -- "$cur"))
        fi
        return
    fi
    if [[ $cur == -* ]]; then
        COMPREPLY=($(compgen -W "-i -t -m -T -e -w -h -V --interactive --tty --mount --timeout --env --workdir --help --version --" -- "$cur"))
    else
        COMPREPLY=($(compgen -c -- "$cur"))
    fi
}

complete -F _sbfs sbfs
complete -F _sbexec sbexec
