#ifndef PROTECTEDSTORE_CEDITLINE_SHIM_H
#define PROTECTEDSTORE_CEDITLINE_SHIM_H

// libedit (libedit-dev): line editing and history for the interactive shell.
#include <stdio.h>
#include <histedit.h>

// `el_set`, `el_get` and `history` take their arguments through `...`, which Swift cannot call: one wrapper
// per operation the shell uses, each passing the types the operation expects (histedit.h).

/// `el_init` on the process's own standard streams: Swift 6 cannot reference the C globals `stdin`, `stdout`
/// and `stderr` safely, and libedit reads and writes their file descriptors.
static inline EditLine *ps_el_init_standard(const char *program) {
    return el_init(program, stdin, stdout, stderr);
}

/// `el_set(EL_PROMPT, …)`: the function libedit calls for the prompt each time it draws the line.
static inline int ps_el_set_prompt(EditLine *el, char *(*prompt)(EditLine *)) {
    return el_set(el, EL_PROMPT, prompt);
}

/// `el_set(EL_EDITOR, …)`: `emacs` or `vi` key bindings.
static inline int ps_el_set_editor(EditLine *el, const char *editor) {
    return el_set(el, EL_EDITOR, editor);
}

/// `el_set(EL_HIST, history, h)`: the history the up and down arrows walk through.
static inline int ps_el_set_history(EditLine *el, History *h) {
    return el_set(el, EL_HIST, history, h);
}

/// `el_set(EL_GETCFN, …)`: the function libedit reads each character with, in place of its own `read(2)`.
static inline int ps_el_set_read_character(EditLine *el, el_rfunc_t read_character) {
    return el_set(el, EL_GETCFN, read_character);
}

/// `el_set(EL_PREP_TERM, 1)`: puts the terminal in libedit's editing mode now, not when it first reads.
static inline int ps_el_prepare_terminal(EditLine *el) {
    return el_set(el, EL_PREP_TERM, 1);
}

/// `history(H_SETSIZE, n)`: how many lines the history keeps.
static inline int ps_history_set_size(History *h, HistEvent *event, int size) {
    return history(h, event, H_SETSIZE, size);
}

/// `history(H_SETUNIQUE, 1)`: a line equal to the one before it is not kept twice.
static inline int ps_history_set_unique(History *h, HistEvent *event, int unique) {
    return history(h, event, H_SETUNIQUE, unique);
}

/// `history(H_ENTER, line)`: keeps `line` as the newest entry.
static inline int ps_history_enter(History *h, HistEvent *event, const char *line) {
    return history(h, event, H_ENTER, line);
}

/// `history(H_LOAD, path)`: reads a history file (libedit's format, which `H_SAVE_FP` writes).
static inline int ps_history_load(History *h, HistEvent *event, const char *path) {
    return history(h, event, H_LOAD, path);
}

/// `history(H_SAVE_FP, file)`: writes the history to an open file.
static inline int ps_history_save_fp(History *h, HistEvent *event, FILE *file) {
    return history(h, event, H_SAVE_FP, file);
}

#endif
