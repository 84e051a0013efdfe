/*
$header
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* Index width: index arrays, sizes and loop indices (index_type="${index_type}"). */
typedef ${index_type}_t spf_index_t;
$helpers
$structs
$signature
{
$body
}
