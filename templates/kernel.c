/*
$header
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* Index width: index arrays, sizes and loop indices (index_type="${index_type}"). */
typedef ${index_type}_t spf_index_t;
/* Value types: the output's elements (${value_name}) and the sums that build them
 * (${acc_name}); each tensor's struct holds its own. */
typedef ${value_type} spf_value_t;
typedef ${acc_type} spf_acc_t;
${infinities}$helpers
$structs
$signature
{
$body
}
