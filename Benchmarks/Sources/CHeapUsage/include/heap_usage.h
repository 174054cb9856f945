#include <stddef.h>
/// Bytes the heap has handed out and not taken back (glibc's mallinfo2().uordblks).
size_t heap_bytes_in_use(void);
