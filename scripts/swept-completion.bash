# bash completion for swept and swept-train. Installed twice, as
# share/bash-completion/completions/swept and .../swept-train (bash-completion
# loads the file named after the command being completed). Commands and flags
# are read from the programs' own --help when Tab is pressed, so they cannot
# drift from the programs; a program that prints no help completes nothing.

# _swept_help_flags PROGRAM [COMMAND]: the --flags its --help lists.
_swept_help_flags() {
  "$@" --help 2>/dev/null | grep -oE -- '--[a-z][a-z0-9_-]*' | sort -u
}

_swept() {
  local cur=${COMP_WORDS[COMP_CWORD]}
  if ((COMP_CWORD == 1)); then
    # The "commands:" block of `swept --help`: "  name   what it does".
    local commands
    commands=$("${COMP_WORDS[0]}" --help 2>/dev/null | awk '/^commands:/ {on = 1; next} on && /^  [a-z]/ {print $1}')
    mapfile -t COMPREPLY < <(compgen -W "$commands" -- "$cur")
  elif [[ $cur == -* ]]; then
    mapfile -t COMPREPLY < <(compgen -W "$(_swept_help_flags "${COMP_WORDS[0]}" "${COMP_WORDS[1]}")" -- "$cur")
  else
    mapfile -t COMPREPLY < <(compgen -f -- "$cur")  # sweep files, databases, keys
  fi
}

_swept_train() {
  local cur=${COMP_WORDS[COMP_CWORD]}
  if [[ $cur == -* ]]; then
    mapfile -t COMPREPLY < <(compgen -W "$(_swept_help_flags "${COMP_WORDS[0]}")" -- "$cur")
  else
    mapfile -t COMPREPLY < <(compgen -f -- "$cur")
  fi
}

complete -F _swept swept
complete -F _swept_train swept-train
