#ifndef PROTECTEDSTORE_CEDITLINE_SHIM_H
#define PROTECTEDSTORE_CEDITLINE_SHIM_H

// libedit (libedit-dev): line editing and history for the interactive shell.
#include <stdio.h>
#include <histedit.h>

#endif
