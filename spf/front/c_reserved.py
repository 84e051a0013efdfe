"""The identifiers generated C may not give a name of the user's: C's keywords, and the names
the C it includes defines or declares.

Generated C includes ``<stdint.h>``, ``<stdlib.h>``, ``<string.h>``, ``<math.h>``,
``<tgmath.h>`` (with ``<complex.h>``, whose ``I`` it undefines), ``<sys/mman.h>`` and
``<omp.h>``.  A name like one of their object-like macros (``NULL``, ``INT32_MAX``,
``INFINITY``) or like gcc's predefined ``linux`` and ``unix`` is replaced by the preprocessor
wherever it stands (:func:`macro_in_c`); a name like a type or a function they declare
(``size_t``, ``exp``) hides it from the code in the scope that declares the name
(:func:`reserved_in_c`).  The lists are those names as glibc and gcc define them (``cc -dM
-E`` and the declarations of ``cc -E`` on those headers: ordinary identifiers, not struct
members or parameters); the patterns add the namespace the C standard reserves for the
implementation (``__x``, ``_X``) and the families other C libraries fill (``*_MAX``,
``M_*``, ``omp_*``).  :func:`spf.back.names.c_identifiers` renames a tensor, scalar or index
found here; a layout file's field may not be a macro.
"""
from __future__ import annotations

import re

from .syntax import C_KEYWORDS


def _words(text: str) -> frozenset[str]:
    return frozenset(text.split())


# object-like macros of those headers, and the system names gcc predefines in its GNU modes
MACROS = _words("""
    BIG_ENDIAN BYTE_ORDER CHAR_BIT EXIT_FAILURE EXIT_SUCCESS HUGE_VAL HUGE_VALF HUGE_VALL
    INFINITY LITTLE_ENDIAN MATH_ERREXCEPT MATH_ERRNO MAX_CANON MAX_INPUT NAN NFDBITS NULL
    PDP_ENDIAN PIPE_BUF PTHREAD_DESTRUCTOR_ITERATIONS WCONTINUED WEXITED WNOHANG WNOWAIT
    WSTOPPED WUNTRACED bool complex false linux math_errhandling true unix
    i386 sun sparc mips vax
""")

# the types, functions and function-like macros they declare, and C23's keywords
DECLARED = _words("""
    CMPLX CMPLXF CMPLXL WEXITSTATUS WIFCONTINUED WIFEXITED WIFSIGNALED WIFSTOPPED WSTOPSIG
    WTERMSIG a64l abort abs acos acosf acosh acoshf acoshl acosl aligned_alloc alloca
    arc4random arc4random_buf arc4random_uniform asin asinf asinh asinhf asinhl asinl
    at_quick_exit atan atan2 atan2f atan2l atanf atanh atanhf atanhl atanl atexit atof atoi
    atol atoll bcmp bcopy be16toh be32toh be64toh blkcnt_t blksize_t bsearch bzero cabs
    cabsf cabsl cacos cacosf cacosh cacoshf cacoshl cacosl caddr_t calloc carg cargf cargl
    casin casinf casinh casinhf casinhl casinl catan catanf catanh catanhf catanhl catanl
    cbrt cbrtf cbrtl ccos ccosf ccosh ccoshf ccoshl ccosl ceil ceilf ceill cexp cexpf cexpl
    cimag cimagf cimagl clearenv clock_t clockid_t clog clogf clogl conj conjf conjl
    copysign copysignf copysignl cos cosf cosh coshf coshl cosl cpow cpowf cpowl cproj
    cprojf cprojl creal crealf creall csin csinf csinh csinhf csinhl csinl csqrt csqrtf
    csqrtl ctan ctanf ctanh ctanhf ctanhl ctanl daddr_t dev_t div div_t double_t drand48
    drand48_r drem dremf dreml ecvt ecvt_r erand48 erand48_r erf erfc erfcf erfcl erff erfl
    exit exp exp2 exp2f exp2l expf expl explicit_bzero expm1 expm1f expm1l fabs fabsf fabsl
    fcvt fcvt_r fd_mask fd_set fdim fdimf fdiml ffs ffsl ffsll finite finitef finitel
    float_t floor floorf floorl fma fmaf fmal fmax fmaxf fmaxl fmin fminf fminl fmod fmodf
    fmodl fpclassify free frexp frexpf frexpl fsblkcnt_t fsfilcnt_t fsid_t gamma gammaf
    gammal gcvt getenv getloadavg getsubopt gid_t htobe16 htobe32 htobe64 htole16 htole32
    htole64 hypot hypotf hypotl id_t ilogb ilogbf ilogbl index initstate initstate_r ino_t
    int16_t int32_t int64_t int8_t int_fast16_t int_fast32_t int_fast64_t int_fast8_t
    int_least16_t int_least32_t int_least64_t int_least8_t intmax_t intptr_t isfinite
    isgreater isgreaterequal isinf isinff isinfl isless islessequal islessgreater isnan
    isnanf isnanl isnormal isunordered j0 j0f j0l j1 j1f j1l jn jnf jnl jrand48 jrand48_r
    key_t l64a labs lcong48 lcong48_r ldexp ldexpf ldexpl ldiv ldiv_t le16toh le32toh
    le64toh lgamma lgamma_r lgammaf lgammaf_r lgammal lgammal_r llabs lldiv lldiv_t llrint
    llrintf llrintl llround llroundf llroundl locale_t loff_t log log10 log10f log10l log1p
    log1pf log1pl log2 log2f log2l logb logbf logbl logf logl lrand48 lrand48_r lrint lrintf
    lrintl lround lroundf lroundl madvise malloc max_align_t mblen mbstowcs mbtowc memccpy
    memchr memcmp memcpy memmove memset mincore mkdtemp mkstemp mkstemps mktemp mlock
    mlockall mmap mode_t modf modff modfl mprotect mrand48 mrand48_r msync munlock
    munlockall munmap nan nanf nanl nearbyint nearbyintf nearbyintl nextafter nextafterf
    nextafterl nexttoward nexttowardf nexttowardl nlink_t nrand48 nrand48_r off_t offsetof
    on_exit pid_t posix_madvise posix_memalign pow powf powl pselect pthread_attr_t
    pthread_barrier_t pthread_barrierattr_t pthread_cond_t pthread_condattr_t pthread_key_t
    pthread_mutex_t pthread_mutexattr_t pthread_once_t pthread_rwlock_t pthread_rwlockattr_t
    pthread_spinlock_t pthread_t ptrdiff_t putenv qecvt qecvt_r qfcvt qfcvt_r qgcvt qsort
    quad_t quick_exit rand rand_r random random_r realloc reallocarray realpath register_t
    remainder remainderf remainderl remquo remquof remquol rindex rint rintf rintl round
    roundf roundl rpmatch scalb scalbf scalbl scalbln scalblnf scalblnl scalbn scalbnf
    scalbnl seed48 seed48_r select setenv setstate setstate_r shm_open shm_unlink signbit
    signgam significand significandf significandl sigset_t sin sinf sinh sinhf sinhl sinl
    size_t sqrt sqrtf sqrtl srand srand48 srand48_r srandom srandom_r ssize_t stpcpy stpncpy
    strcasecmp strcasecmp_l strcat strchr strcmp strcoll strcoll_l strcpy strcspn strdup
    strerror strerror_l strerror_r strlen strncasecmp strncasecmp_l strncat strncmp strncpy
    strndup strnlen strpbrk strrchr strsep strsignal strspn strstr strtod strtof strtok
    strtok_r strtol strtold strtoll strtoq strtoul strtoull strtouq strxfrm strxfrm_l
    suseconds_t system tan tanf tanh tanhf tanhl tanl tgamma tgammaf tgammal time_t timer_t
    trunc truncf truncl u_char u_int u_int16_t u_int32_t u_int64_t u_int8_t u_long u_quad_t
    u_short uid_t uint uint16_t uint32_t uint64_t uint8_t uint_fast16_t uint_fast32_t
    uint_fast64_t uint_fast8_t uint_least16_t uint_least32_t uint_least64_t uint_least8_t
    uintmax_t uintptr_t ulong unsetenv ushort valloc wchar_t wcstombs wctomb y0 y0f y0l y1
    y1f y1l yn ynf ynl
    alignas alignof constexpr nullptr static_assert thread_local typeof typeof_unqual
""")

# the implementation's namespace, and the macro families of C libraries (INT32_MAX,
# INT64_C, FP_NAN, M_PI, MAP_SHARED)
_MACRO_FAMILIES = re.compile(r"__\w*|_[A-Z]\w*|[A-Z][A-Z0-9_]*_(MAX|MIN)|U?INT\w*_C"
                             r"|(MADV|MAP|PROT|MS|MCL|POSIX_MADV|FP|M|FD)_\w+")


def macro_in_c(name: str) -> bool:
    """Whether ``name`` is a C keyword or may be a macro of generated C (replaced wherever it
    stands: even a struct member may not take it)."""
    return name in C_KEYWORDS or name in MACROS or _MACRO_FAMILIES.fullmatch(name) is not None


def reserved_in_c(name: str) -> bool:
    """Whether generated C cannot declare ``name`` as a parameter or a local of its own (a
    keyword, a macro, or a type or function of its headers it would hide)."""
    return macro_in_c(name) or name in DECLARED or name.startswith("omp_")
