/* SPDX-License-Identifier: Apache-2.0
 * test_clienthello.c - table tests of clienthello.c: real first flights
 * captured from openssl s_client, curl, python and node (against a
 * listener on loopback inside a private network namespace), hand-made
 * malformed ones, non-TLS first flights, every TCP split of every case,
 * fragmentation across records, and the size limits.
 *
 * Cases are written in a small byte language (see build()): hex pairs,
 * 'ASCII text', zN; for N zero bytes, and {W ... } for a vector whose
 * W-byte (1, 2 or 3) length prefix is computed, so a malformed length has
 * to be written out in hex on purpose.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clienthello.h"
#include "tap.h"
#include "util.h"

/* ------------------------------------------------------------------ */
/* Real first flights (hex), captured on 127.0.0.1 in `unshare --net`.  */

/* openssl s_client -servername example.com (TLS 1.3 and 1.2 offered) */
static const char openssl_sni13[] =
	"1603010138010001340303c46993d52614ec47dacd293807c5d8b73fa158250f"
	"d97acaeece9f71816856312005acdfca4fd7b755885660f05201afbd9a8d2b9d"
	"2f8db26329e05a3d401d2676003e130213031301c02cc030009fcca9cca8ccaa"
	"c02bc02f009ec024c028006bc023c0270067c00ac0140039c009c0130033009d"
	"009c003d003c0035002f00ff010000ad00000010000e00000b6578616d706c65"
	"2e636f6d000b000403000102000a00160014001d0017001e0019001801000101"
	"010201030104002300000016000000170000000d002a00280403050306030807"
	"08080809080a080b080408050806040105010601030303010302040205020602"
	"002b0009080304030303020301002d00020101003300260024001d002088b58e"
	"946dc48dc913d080d2f3f80d6f4d5b05ee5a15d7443b36e9b41cf6cd28";

/* openssl s_client -noservername */
static const char openssl_nosni13[] =
	"16030101240100012003039872a02b169739e8d483c94bf33074fd63a749863b"
	"e82a6c5f3bb5e96bc38cb6204f6e711aacc27e99c48a8cfdc8b4f90be9647f88"
	"44a76dd08be948bf848e3bca003e130213031301c02cc030009fcca9cca8ccaa"
	"c02bc02f009ec024c028006bc023c0270067c00ac0140039c009c0130033009d"
	"009c003d003c0035002f00ff01000099000b000403000102000a00160014001d"
	"0017001e0019001801000101010201030104002300000016000000170000000d"
	"002a0028040305030603080708080809080a080b080408050806040105010601"
	"030303010302040205020602002b0009080304030303020301002d0002010100"
	"3300260024001d00207b7bdad3eeb94a243f3e4fe00e8cf10186ce6d7ff8a1fd"
	"75608ffe89bc0e0d28";

/* openssl s_client -tls1_2 -servername api.example.org */
static const char openssl_tls12[] =
	"16030100cf010000cb03037782745e1dc9dffa6c22086266f0839e9a5a0f77d1"
	"6bdbfb2dcc8fa4376b855f000038c02cc030009fcca9cca8ccaac02bc02f009e"
	"c024c028006bc023c0270067c00ac0140039c009c0130033009d009c003d003c"
	"0035002f00ff0100006a00000014001200000f6170692e6578616d706c652e6f"
	"7267000b000403000102000a000c000a001d0017001e00190018002300000016"
	"000000170000000d002a0028040305030603080708080809080a080b08040805"
	"0806040105010601030303010302040205020602";

/* openssl s_client -tls1_2 -noservername */
static const char openssl_tls12_nosni[] =
	"16030100b7010000b30303616c8e928fa1fc0f4df9490b731a19aa76b2069578"
	"c1ebd71214686f1af6fa1c000038c02cc030009fcca9cca8ccaac02bc02f009e"
	"c024c028006bc023c0270067c00ac0140039c009c0130033009d009c003d003c"
	"0035002f00ff01000052000b000403000102000a000c000a001d0017001e0019"
	"0018002300000016000000170000000d002a0028040305030603080708080809"
	"080a080b080408050806040105010601030303010302040205020602";

/* openssl s_client -alpn h2,http/1.1 -servername github.com */
static const char openssl_alpn[] =
	"1603010149010001450303d958786eeb32c6dab1dc3149668308cb88c1b0ff6c"
	"9672ce5c6bb8f4c3ad382c2072a3f590de415461d84a487083b0d9ac7101ac7f"
	"0b1ebea9ea35c9639facf29f003e130213031301c02cc030009fcca9cca8ccaa"
	"c02bc02f009ec024c028006bc023c0270067c00ac0140039c009c0130033009d"
	"009c003d003c0035002f00ff010000be0000000f000d00000a6769746875622e"
	"636f6d000b000403000102000a00160014001d0017001e001900180100010101"
	"0201030104002300000010000e000c02683208687474702f312e310016000000"
	"170000000d002a0028040305030603080708080809080a080b08040805080604"
	"0105010601030303010302040205020602002b0009080304030303020301002d"
	"00020101003300260024001d00200b6710383cb5a9e221a4020ffef15b0364c3"
	"7817e548ae08a6bc753278f4750f";

/* openssl s_client -servername EXAMPLE.COM */
static const char openssl_upper[] =
	"1603010138010001340303f54b28507569ea15d9b81f0211e44722dcbfe65474"
	"05ca3663427a50c25adb6120ff70251ec92b8bcb05bf924c1a039e376fa4aa70"
	"a67e9e60f726428ea4b97465003e130213031301c02cc030009fcca9cca8ccaa"
	"c02bc02f009ec024c028006bc023c0270067c00ac0140039c009c0130033009d"
	"009c003d003c0035002f00ff010000ad00000010000e00000b4558414d504c45"
	"2e434f4d000b000403000102000a00160014001d0017001e0019001801000101"
	"010201030104002300000016000000170000000d002a00280403050306030807"
	"08080809080a080b080408050806040105010601030303010302040205020602"
	"002b0009080304030303020301002d00020101003300260024001d0020d7cc3d"
	"fad199506d8ccd4ce72bceb3debb5ae276120f360242841d4012b48510";

/* openssl s_client -servername 127.0.0.1 */
static const char openssl_ip[] =
	"1603010136010001320303b6f56c7498162b830bfe4967e0b2b199ce687200cc"
	"85c8bafa8c1cd57885da6720cd4b4f6bbcb95baaf3b653cf52ca3db877efad35"
	"755825ef30a7dd0ec30b335e003e130213031301c02cc030009fcca9cca8ccaa"
	"c02bc02f009ec024c028006bc023c0270067c00ac0140039c009c0130033009d"
	"009c003d003c0035002f00ff010000ab0000000e000c0000093132372e302e30"
	"2e31000b000403000102000a00160014001d0017001e00190018010001010102"
	"01030104002300000016000000170000000d002a002804030503060308070808"
	"0809080a080b080408050806040105010601030303010302040205020602002b"
	"0009080304030303020301002d00020101003300260024001d00204606e064b8"
	"7d3f480e286c0f6e935b59d6e50947d6be8e95fc481dcae9838365";

/* openssl s_client -tls1_3 -servername example.com. */
static const char openssl_dot[] =
	"16030100f1010000ed0303aa33b1a2e91bf625f4cb5b6f7ebd0c287c8052478c"
	"b0329ef6480b96493d924120570aa99b701018529c1d8f32444ec7a1be547569"
	"63e3c3b1167b8dea71bd3f2e000813021303130100ff0100009c00000011000f"
	"00000c6578616d706c652e636f6d2e000b000403000102000a00160014001d00"
	"17001e0019001801000101010201030104002300000016000000170000000d00"
	"1e001c040305030603080708080809080a080b08040805080604010501060100"
	"2b0003020304002d00020101003300260024001d0020a9e32e6540d7fcf305d8"
	"9263284811986db582e990c2cbdbb4e856e497a50f68";

/* openssl s_client -tls1_2 -max_send_frag 512, 84 suites, 28 ALPN names:
 * two records (512 + 6 bytes) */
static const char openssl_frag[] =
	"1603010200010002020303739072e2756bd4ac6b60729d8f2dba8347ef46c281"
	"2a1fc2c8ea2fb7578f823a0000a8c02cc03000a3009fcca9cca8ccaac0afc0ad"
	"c0a3c09fc05dc061c057c05300a7c02bc02f00a2009ec0aec0acc0a2c09ec05c"
	"c060c056c05200a6c024c028006b006ac073c07700c400c3006d00c5c023c027"
	"00670040c072c07600be00bd006c00bfc00ac0140039003800880087c019003a"
	"0089c009c0130033003200450044c01800340046009dc0a1c09dc051009cc0a0"
	"c09cc050003d00c0003c00ba00350084002f004100ff01000131000000150013"
	"000010667261672e6578616d706c652e636f6d000b000403000102000a000c00"
	"0a001d0017001e0019001800230000001000bc00ba02683208687474702f312e"
	"3108737064792f332e3103683263097374756e2e7475726e0677656272746308"
	"632d7765627274630366747004696d617004706f70330b6d616e616765736965"
	"766504636f61700b786d70702d636c69656e740b786d70702d7365727665720a"
	"61636d652d746c732f31046d71747403646f74076e74736b652f310673756e72"
	"706302683303736d6203697263046e6e7470046e6e737003646f71057369702f"
	"32077464732f382e30056469636f6d0016000000170000000d0030002e040305"
	"030603080708080809080a080b08040805080604010501060103030203030102"
	"01030202021603010006040205020602";

/* openssl s_client -sess_in -early_data: pre_shared_key, early_data;
 * followed by a change_cipher_spec and a 0-RTT record (34 bytes) */
static const char openssl_psk[] =
	"16030101a20100019e0303a707e3b3fc2ab2139d307e5f7178ee33cfb3eac84f"
	"8841e9d9e963904ef667b0208077ac6e66a4b8809fb747f414fb803960ffabe9"
	"6d0d665354fc49b788058e09003e130213031301c02cc030009fcca9cca8ccaa"
	"c02bc02f009ec024c028006bc023c0270067c00ac0140039c009c0130033009d"
	"009c003d003c0035002f00ff01000117000000170015000012726573756d652e"
	"6578616d706c652e636f6d000b000403000102000a00160014001d0017001e00"
	"19001801000101010201030104002300000016000000170000000d002a002804"
	"0305030603080708080809080a080b0804080508060401050106010303030103"
	"02040205020602002b0009080304030303020301002d00020101003300260024"
	"001d0020db288aa2d7d34f7a5f6dcfec8cde0de6b0d36982e934cb30a6b2020c"
	"23b62f54002a00000029005b00260020e35ec32e4e7a42eaac2f6fe8badb0fe1"
	"df2f07e9670a0726b9b252dd29a323e30da854b8003130f47775fa3135090873"
	"dbefb44bc3f07ff10adea646e302553489fe88f2f7ba6d3d6057fcc3eb028585"
	"9fbfb4cbdba55f1403030001011703030017bf37c85815cc27866155d83faecb"
	"d699d6dbba9aa0bc58";

/* curl --http2 https://curl.example.com:4433/ (padding extension) */
static const char curl_h2[] =
	"1603010200010001fc030300bddeec93a7950243f874a1284fa09a228c5c9753"
	"35bc2f663a230bee378fb420517bcc3fd843e50337ea7ff79b8c291e5bf633f9"
	"39d8749834b1c064832f6664003e130213031301c02cc030009fcca9cca8ccaa"
	"c02bc02f009ec024c028006bc023c0270067c00ac0140039c009c0130033009d"
	"009c003d003c0035002f00ff010001750000001500130000106375726c2e6578"
	"616d706c652e636f6d000b000403000102000a00160014001d0017001e001900"
	"18010001010102010301040010000e000c02683208687474702f312e31001600"
	"000017000000310000000d002a0028040305030603080708080809080a080b08"
	"0408050806040105010601030303010302040205020602002b00090803040303"
	"03020301002d00020101003300260024001d002040607e5b185059d7b0cd25ba"
	"c83c382f309879a339b533da2ad92f34e42d9849001500ad0000000000000000"
	"0000000000000000000000000000000000000000000000000000000000000000"
	"0000000000000000000000000000000000000000000000000000000000000000"
	"0000000000000000000000000000000000000000000000000000000000000000"
	"0000000000000000000000000000000000000000000000000000000000000000"
	"0000000000000000000000000000000000000000000000000000000000000000"
	"0000000000";

/* node tls.connect servername registry.npmjs.org, ALPN h2, http/1.1 */
static const char node_tls[] =
	"1603010185010001810303da0eb5fee64495ebd4074b970b652074be261e37fb"
	"f5913935a1982283aad555205b2ea1261451bed916a27e2adff55e6fe3b2c54e"
	"e40a33f0a30a01f98c337fbc0076130213031301c02fc02bc030c02c009ec027"
	"0067c028006b00a3009fcca9cca8ccaac0afc0adc0a3c09fc05dc061c057c053"
	"00a2c0aec0acc0a2c09ec05cc060c056c052c024006ac0230040c00ac0140039"
	"0038c009c01300330032009dc0a1c09dc051009cc0a0c09cc050003d003c0035"
	"002f00ff010000c200000017001500001272656769737472792e6e706d6a732e"
	"6f7267000b000403000102000a00160014001d0017001e001900180100010101"
	"0201030104002300000010000e000c02683208687474702f312e310016000000"
	"170000000d002a0028040305030603080708080809080a080b08040805080604"
	"0105010601030303010302040205020602002b00050403040303002d00020101"
	"003300260024001d00208ad514afd655fb89a5b9fbc6c7a68367ef82597410ac"
	"5c31b1ecf03c1373e952";

/* ------------------------------------------------------------------ */
/* The byte language.                                                   */

#define BUF_MAX (CLIENTHELLO_FLIGHT_MAX + 4096)

static int hexval(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

/* Writes the bytes @spec describes into @out (@cap bytes) and returns
 * their number. Hex pairs; 'text' (no quote inside); zN; is N zero bytes;
 * {W ... } is a vector with a W-byte big-endian length prefix. A bad spec
 * is a bug in this file and aborts. */
static size_t build(const char *spec, uint8_t *out, size_t cap)
{
	size_t n = 0, start[8], width[8], depth = 0;
	const char *s = spec;

	while (*s) {
		if (*s == ' ' || *s == '\n' || *s == '\t') {
			s++;
		} else if (*s == '{') {
			ASSERT(depth < 8 && s[1] >= '1' && s[1] <= '3');
			width[depth] = (size_t)(s[1] - '0');
			start[depth] = n;
			ASSERT(n + width[depth] <= cap);
			n += width[depth++];
			s += 2;
		} else if (*s == '}') {
			size_t w, len, i;

			ASSERT(depth > 0);
			w = width[--depth];
			len = n - start[depth] - w;
			ASSERT(len >> (8 * w) == 0);
			for (i = 0; i < w; i++)
				out[start[depth] + i] =
					(uint8_t)(len >> (8 * (w - 1 - i)));
			s++;
		} else if (*s == '\'') {
			for (s++; *s != '\''; s++) {
				ASSERT(*s != '\0' && n < cap);
				out[n++] = (uint8_t)*s;
			}
			s++;
		} else if (*s == 'z') {
			char *end;
			unsigned long k = strtoul(s + 1, &end, 10);

			ASSERT(*end == ';' && n + k <= cap);
			memset(out + n, 0, k);
			n += k;
			s = end + 1;
		} else {
			int hi = hexval(s[0]), lo = hexval(s[1]);

			ASSERT(hi >= 0 && lo >= 0 && n < cap);
			out[n++] = (uint8_t)(hi << 4 | lo);
			s += 2;
		}
	}
	ASSERT(depth == 0);
	return n;
}

/* Frames the handshake message @msg (@n bytes) as records whose payloads
 * end at the offsets @cuts (ascending, inside the message); the last
 * record takes the rest. Later records use record version 0x0303. */
static size_t frame(const uint8_t *msg, size_t n, const size_t *cuts,
		    size_t ncuts, uint8_t *out, size_t cap)
{
	size_t o = 0, from = 0, i;

	for (i = 0; i <= ncuts; i++) {
		size_t to = (cuts && i < ncuts) ? cuts[i] : n;
		size_t len = to - from;

		ASSERT(to > from && len <= 0xffff && o + 5 + len <= cap);
		out[o++] = 0x16;
		out[o++] = 0x03;
		out[o++] = i == 0 ? 0x01 : 0x03;
		out[o++] = (uint8_t)(len >> 8);
		out[o++] = (uint8_t)len;
		memcpy(out + o, msg + from, len);
		o += len;
		from = to;
	}
	return o;
}

/* Frames @msg into @nrec records of (nearly) equal size. */
static size_t frame_even(const uint8_t *msg, size_t n, size_t nrec,
			 uint8_t *out, size_t cap)
{
	size_t cuts[64], i;

	ASSERT(nrec >= 1 && nrec <= 65 && nrec <= n);
	for (i = 1; i < nrec; i++)
		cuts[i - 1] = n * i / nrec;
	return frame(msg, n, cuts, nrec - 1, out, cap);
}

/* A ClientHello body -> handshake message (type 1, 24-bit length). */
static size_t handshake(const uint8_t *body, size_t n, uint8_t *out,
			size_t cap)
{
	ASSERT(n + 4 <= cap && n <= 0xffffff);
	memmove(out + 4, body, n);
	out[0] = 1;
	out[1] = (uint8_t)(n >> 16);
	out[2] = (uint8_t)(n >> 8);
	out[3] = (uint8_t)n;
	return n + 4;
}

/* ------------------------------------------------------------------ */
/* Comparing answers.                                                   */

static bool same_answer(enum clienthello_result ra,
			const struct clienthello *a,
			enum clienthello_result rb,
			const struct clienthello *b)
{
	size_t i;

	if (ra != rb || strcmp(a->reason, b->reason) != 0 ||
	    a->need != b->need || a->sni_error != b->sni_error ||
	    a->length != b->length || a->records != b->records ||
	    a->record_version != b->record_version ||
	    a->legacy_version != b->legacy_version ||
	    a->offers_tls13 != b->offers_tls13 || a->has_ech != b->has_ech ||
	    a->has_sni != b->has_sni || strcmp(a->sni, b->sni) != 0 ||
	    a->alpn_count != b->alpn_count)
		return false;
	for (i = 0; i < a->alpn_count && i < CLIENTHELLO_ALPN_MAX; i++) {
		if (a->alpn[i].len != b->alpn[i].len ||
		    memcmp(a->alpn[i].name, b->alpn[i].name,
			   a->alpn[i].len + 1u) != 0)
			return false;
	}
	return true;
}

/* Parses a private copy of exactly @len bytes, so that ASan (make SAN=1)
 * sees any read past the end. */
static enum clienthello_result parse_copy(const uint8_t *buf, size_t len,
					  struct clienthello *h)
{
	uint8_t *copy = util_xmalloc(len ? len : 1);
	enum clienthello_result r;

	memcpy(copy, buf, len);
	r = clienthello_parse(len ? copy : NULL, len, h);
	free(copy);
	return r;
}

/* Feeds every prefix of @buf (a sample of them when it is large) and
 * checks that the answer is prefix-stable: each prefix answers INCOMPLETE
 * or exactly what the whole buffer answers; an INCOMPLETE prefix of length
 * L with need k is followed by INCOMPLETE for every length below L + k;
 * INCOMPLETE carries no fields. */
static bool check_prefixes(const uint8_t *buf, size_t n, const char *name)
{
	static size_t lens[8192 + 700];
	static enum clienthello_result res[8192 + 700];
	static size_t needs[8192 + 700];
	struct clienthello whole, h;
	enum clienthello_result rw = parse_copy(buf, n, &whole);
	size_t m = 0, i, j;
	bool ok = true;

	if (n <= 8192) {
		for (i = 0; i <= n; i++)
			lens[m++] = i;
	} else {
		for (i = 0; i <= n; i++) {
			if (i < 300 || n - i < 300 || i % (n / 64) == 0 ||
			    i % 16384 < 8 || i % 16384 > 16380)
				lens[m++] = i;
		}
		ASSERT(m <= ARRAY_SIZE(lens));
	}
	for (i = 0; i < m; i++) {
		enum clienthello_result r = parse_copy(buf, lens[i], &h);

		res[i] = r;
		needs[i] = h.need;
		if (r == CLIENTHELLO_INCOMPLETE) {
			if (h.need < 1 || h.has_sni || h.sni[0] || h.length ||
			    h.records || h.alpn_count ||
			    strcmp(h.reason, "incomplete") != 0) {
				tap_diag("%s: prefix %zu: bad INCOMPLETE "
					 "answer", name, lens[i]);
				ok = false;
			}
		} else if (!same_answer(r, &h, rw, &whole)) {
			tap_diag("%s: prefix %zu answers %s (%s), whole "
				 "answers %s (%s)", name, lens[i],
				 clienthello_result_to_string(r), h.reason,
				 clienthello_result_to_string(rw),
				 whole.reason);
			ok = false;
		}
	}
	for (i = 0; i < m && ok; i++) {
		if (res[i] != CLIENTHELLO_INCOMPLETE)
			continue;
		for (j = i + 1; j < m && lens[j] < lens[i] + needs[i]; j++) {
			if (res[j] != CLIENTHELLO_INCOMPLETE) {
				tap_diag("%s: prefix %zu needs %zu more, but "
					 "prefix %zu answers %s", name,
					 lens[i], needs[i], lens[j],
					 clienthello_result_to_string(res[j]));
				ok = false;
				break;
			}
		}
	}
	return ok;
}

/* ------------------------------------------------------------------ */
/* The table.                                                           */

#define C_OK CLIENTHELLO_OK
#define C_INC CLIENTHELLO_INCOMPLETE
#define C_NOT CLIENTHELLO_NOT_TLS
#define C_BAD CLIENTHELLO_MALFORMED
#define H(x) HOSTNAME_##x
#define YES 2
#define NO 1

/* A minimal body: TLS 1.2 legacy_version, zero random, no session id, two
 * suites, null compression. EXTS() appends an extensions block. */
#define HELLO_PRE "0303 z32; {1 } {2 1301 c02f} {1 00} "
#define EXTS(x) HELLO_PRE "{2 " x "} "
#define SNI(name) "0000 {2 {2 00 {2 '" name "'}}} "
#define SNI_RAW(x) "0000 {2 {2 00 {2 " x "}}} "
#define ALPN2 "0010 {2 {2 {1 'h2'} {1 'http/1.1'}}} "
#define SV13 "002b {2 {1 0304 0303}} "
#define SV12 "002b {2 {1 0303 0302}} "
#define ECH_OUTER "fe0d {2 00 0001 0001 2a {2 z32;} {2 z64;}} "
#define REC(x) "16 0301 {2 " x "} "
#define HS(x) "01 {3 " x "} "
/* The first record of a two-record hello: only the handshake header of a
 * HELLO_PRE body (43 bytes). */
#define SPLIT_HDR "16 0301 0004 01 00002b "

enum kind {
	FLIGHT, /* spec is the whole first flight */
	BODY,   /* spec is a ClientHello body, sent in one record */
};

struct tcase {
	const char *name;
	const char *spec;
	const char *detail;     /* OK: the SNI ("" for none); NOT_TLS and
				   MALFORMED: the reason; else unused */
	const char *alpn;       /* OK: stored ALPN names joined by ','
				   (NULL: must be none) */
	size_t need;            /* INCOMPLETE: expected need */
	size_t alpn_count;      /* OK with alpn: 0 means as many as listed */
	size_t length;          /* OK: 0 means the whole input */
	enum kind kind;
	enum clienthello_result want;
	enum hostname_error herr;
	int tls13, ech;         /* YES, NO, or 0: not checked */
	unsigned int records;   /* OK: 0 means 1 */
};

#define CASE(n, k, s, w, d, ...)                                            \
	{ .name = (n), .kind = (k), .spec = (s), .want = (w), .detail = (d), \
	  __VA_ARGS__ }

static const struct tcase cases[] = {
	/* Real clients. */
	CASE("openssl, SNI, TLS 1.3", FLIGHT, openssl_sni13, C_OK,
	     "example.com", .tls13 = YES, .ech = NO),
	CASE("openssl, no SNI, TLS 1.3", FLIGHT, openssl_nosni13, C_OK, "",
	     .tls13 = YES),
	CASE("openssl, SNI, TLS 1.2 only", FLIGHT, openssl_tls12, C_OK,
	     "api.example.org", .tls13 = NO),
	CASE("openssl, no SNI, TLS 1.2 only", FLIGHT, openssl_tls12_nosni, C_OK,
	     "", .tls13 = NO),
	CASE("openssl, ALPN h2,http/1.1", FLIGHT, openssl_alpn, C_OK,
	     "github.com", .tls13 = YES, .alpn = "h2,http/1.1"),
	CASE("openssl, uppercase SNI is normalised", FLIGHT, openssl_upper,
	     C_OK, "example.com"),
	CASE("openssl, IP literal SNI", FLIGHT, openssl_ip, C_BAD,
	     "SNI is an IP literal"),
	CASE("openssl, SNI with a trailing dot", FLIGHT, openssl_dot, C_BAD,
	     "SNI ends with a dot"),
	CASE("openssl, two records, 28 ALPN names", FLIGHT, openssl_frag, C_OK,
	     "frag.example.com", .tls13 = NO,
	     .alpn = "h2,http/1.1,spdy/3.1,h2c", .alpn_count = 28,
	     .records = 2),
	CASE("openssl, PSK and 0-RTT data after the hello", FLIGHT, openssl_psk,
	     C_OK, "resume.example.com", .tls13 = YES, .length = 423),
	CASE("curl, h2, padding extension", FLIGHT, curl_h2, C_OK,
	     "curl.example.com", .tls13 = YES, .alpn = "h2,http/1.1"),
	CASE("node, h2", FLIGHT, node_tls, C_OK, "registry.npmjs.org",
	     .tls13 = YES, .alpn = "h2,http/1.1"),

	/* Well-formed hand-made hellos. */
	CASE("no extensions block (pre-TLS 1.3 form)", BODY, HELLO_PRE,
	     C_OK, "",
	     .tls13 = NO),
	CASE("empty extensions block", BODY, EXTS(""), C_OK, ""),
	CASE("SNI", BODY, EXTS(SNI("example.com")), C_OK, "example.com"),
	CASE("mixed-case SNI", BODY, EXTS(SNI("WWW.Example.COM")), C_OK,
	     "www.example.com"),
	CASE("SNI with an underscore", BODY, EXTS(SNI("_acme.example.com")),
	     C_OK, "_acme.example.com"),
	CASE("single-label SNI", BODY, EXTS(SNI("localhost")), C_OK,
	     "localhost"),
	CASE("punycode SNI", BODY, EXTS(SNI("xn--bcher-kva.example")), C_OK,
	     "xn--bcher-kva.example"),
	CASE("GREASE and unknown extensions are skipped", BODY,
	     EXTS("0a0a {2 } ff01 {2 00} " SNI("a.example") "1a1a {2 00} "
	       "0015 {2 z100;}"),
	     C_OK, "a.example"),
	CASE("supported_versions with TLS 1.3 and GREASE", BODY,
	     EXTS(SNI("a.example") "002b {2 {1 7a7a 0304 0303}}"), C_OK,
	     "a.example", .tls13 = YES),
	CASE("supported_versions with GREASE but not TLS 1.3", BODY,
	     EXTS(SNI("a.example") "002b {2 {1 7a7a 0303}}"), C_OK,
	     "a.example", .tls13 = NO),
	CASE("supported_versions without TLS 1.3", BODY,
	     EXTS(SNI("a.example") SV12), C_OK, "a.example", .tls13 = NO),
	CASE("legacy_version 0x0304 alone does not offer TLS 1.3", BODY,
	     "0304 z32; {1 } {2 1301} {1 00} {2 " SNI("a.example") "}", C_OK,
	     "a.example", .tls13 = NO),
	CASE("ALPN with five names keeps four", BODY,
	     EXTS(SNI("a.example") "0010 {2 {2 {1 'a'} {1 'bb'} {1 'ccc'} "
	       "{1 'dddd'} {1 'eeeee'}}}"),
	     C_OK, "a.example", .alpn = "a,bb,ccc,dddd", .alpn_count = 5),
	CASE("ALPN name of 255 bytes", BODY,
	     EXTS(SNI("a.example") "0010 {2 {2 {1 z255;}}}"), C_OK,
	     "a.example", .alpn = "", .alpn_count = 1),
	CASE("encrypted_client_hello: outer SNI reported", BODY,
	     EXTS(SNI("public.example") SV13 ECH_OUTER), C_OK,
	     "public.example", .tls13 = YES, .ech = YES),
	CASE("session id of 32 bytes", BODY,
	     "0303 z32; {1 z32;} {2 1301} {1 00} {2 " SNI("a.example") "}",
	     C_OK, "a.example"),
	CASE("legacy_version 0x0300", BODY, "0300 z32; {1 } {2 000a} {1 00}",
	     C_OK, ""),
	CASE("record version 0x0303", FLIGHT,
	     "16 0303 {2 " HS(EXTS(SNI("a.example"))) "}", C_OK, "a.example"),
	CASE("record version 0x0300", FLIGHT,
	     "16 0300 {2 " HS(EXTS(SNI("a.example"))) "}", C_OK, "a.example"),
	CASE("handshake header split over two records", FLIGHT,
	     "16 0301 0001 01  16 0301 0003 00002b  16 0301 002b " HELLO_PRE,
	     C_OK, "", .records = 3),
	CASE("bytes after the hello are not read", FLIGHT,
	     REC(HS(EXTS(SNI("a.example")))) "17 0303 0005 0102030405", C_OK,
	     "a.example", .length = 72),
	CASE("garbage after the hello is not read", FLIGHT,
	     REC(HS(EXTS(SNI("a.example")))) "ffffff", C_OK, "a.example",
	     .length = 72),

	/* Not TLS. */
	CASE("HTTP request", FLIGHT,
	     "'GET / HTTP/1.1' 0d0a 'Host: example.com' 0d0a 0d0a", C_NOT,
	     "not a TLS handshake record"),
	CASE("HTTP/2 preface", FLIGHT,
	     "'PRI * HTTP/2.0' 0d0a0d0a 'SM' 0d0a0d0a",
	     C_NOT, "not a TLS handshake record"),
	CASE("SSH banner", FLIGHT, "'SSH-2.0-OpenSSH_9.6' 0d0a", C_NOT,
	     "not a TLS handshake record"),
	CASE("TLS alert record", FLIGHT, "15 0303 0002 0228", C_NOT,
	     "not a TLS handshake record"),
	CASE("change_cipher_spec record", FLIGHT, "14 0303 0001 01", C_NOT,
	     "not a TLS handshake record"),
	CASE("application_data record", FLIGHT, "17 0303 0005 z5;", C_NOT,
	     "not a TLS handshake record"),
	CASE("SSLv2-compatible hello", FLIGHT,
	     "80 2e 01 0301 0015 0000 0010 010080 0700c0 030080 000035 00002f "
	     "z16;",
	     C_NOT, "not a TLS handshake record"),
	CASE("one NUL byte", FLIGHT, "00", C_NOT, "not a TLS handshake record"),
	CASE("record version 0x0200", FLIGHT, "16 0200 0004", C_NOT,
	     "record version is not TLS"),
	CASE("record version 0x0305", FLIGHT, "16 0305", C_NOT,
	     "record version is not TLS"),
	CASE("record version 0x0403", FLIGHT, "16 0403 0010", C_NOT,
	     "record version is not TLS"),
	CASE("first handshake message is a ServerHello", FLIGHT,
	     REC("02 {3 0303 z32; 00 1301 00 {2 }}"), C_NOT,
	     "first handshake message is not a ClientHello"),
	CASE("first handshake message is a HelloRequest", FLIGHT,
	     REC("00 000000"), C_NOT,
	     "first handshake message is not a ClientHello"),

	/* Prefixes. */
	CASE("empty buffer", FLIGHT, "", C_INC, NULL, .need = 1),
	CASE("record type only", FLIGHT, "16", C_INC, NULL, .need = 2),
	CASE("record type and version", FLIGHT, "16 0301", C_INC, NULL,
	     .need = 2),
	CASE("record header only", FLIGHT, "16 0301 0030", C_INC, NULL,
	     .need = 1),
	CASE("handshake type only", FLIGHT, "16 0301 0030 01", C_INC, NULL,
	     .need = 3),
	CASE("handshake header only", FLIGHT, "16 0301 0030 01 00002c", C_INC,
	     NULL, .need = 44),
	CASE("first of two records", FLIGHT, SPLIT_HDR, C_INC, NULL,
	     .need = 1),
	CASE("second record header partial", FLIGHT, SPLIT_HDR "16 03", C_INC,
	     NULL, .need = 1),

	/* Malformed record layer. */
	CASE("empty handshake record", FLIGHT, "16 0301 0000", C_BAD,
	     "empty handshake record"),
	CASE("record of 2^14 + 1 bytes", FLIGHT, "16 0301 4001", C_BAD,
	     "record longer than 2^14 bytes"),
	CASE("record of 2^14 + 256 bytes", FLIGHT, "16 0301 4100", C_BAD,
	     "record longer than 2^14 bytes"),
	CASE("ClientHello of 64 KiB + 1", FLIGHT, "16 0301 0010 01 00fffd",
	     C_BAD, "ClientHello larger than 64 KiB"),
	CASE("ClientHello of 16 MiB", FLIGHT, "16 0301 0010 01 ffffff", C_BAD,
	     "ClientHello larger than 64 KiB"),
	CASE("record longer than the ClientHello", FLIGHT,
	     REC(HS(HELLO_PRE) "00"), C_BAD,
	     "data after the ClientHello in its record"),
	CASE("ClientHello ends inside its last record", FLIGHT,
	     SPLIT_HDR "16 0303 002c", C_BAD,
	     "data after the ClientHello in its record"),
	CASE("alert record inside the ClientHello", FLIGHT,
	     SPLIT_HDR "15 0303 0002 0228", C_BAD,
	     "non-handshake record inside the ClientHello"),
	CASE("change_cipher_spec record inside the ClientHello", FLIGHT,
	     SPLIT_HDR "14 0303 0001 01", C_BAD,
	     "non-handshake record inside the ClientHello"),
	CASE("application_data record inside the ClientHello", FLIGHT,
	     SPLIT_HDR "17 0303 002b", C_BAD,
	     "non-handshake record inside the ClientHello"),
	CASE("bad version on the second record", FLIGHT,
	     SPLIT_HDR "16 0200 002b", C_BAD,
	     "bad record version inside the ClientHello"),
	CASE("empty second record", FLIGHT, SPLIT_HDR "16 0303 0000", C_BAD,
	     "empty handshake record"),

	/* Malformed ClientHello body. */
	CASE("empty ClientHello", FLIGHT, REC(HS("")), C_BAD,
	     "truncated ClientHello"),
	CASE("truncated random", BODY, "0303 z31;", C_BAD,
	     "truncated ClientHello"),
	CASE("legacy_version 0x0200", BODY, "0200 z32; {1 } {2 1301} {1 00}",
	     C_BAD, "ClientHello legacy_version is not 3.x"),
	CASE("legacy_version 0xfefd (DTLS)", BODY,
	     "fefd z32; {1 } {2 1301} {1 00}", C_BAD,
	     "ClientHello legacy_version is not 3.x"),
	CASE("session id of 33 bytes", BODY,
	     "0303 z32; {1 z33;} {2 1301} {1 00}",
	     C_BAD, "malformed legacy_session_id"),
	CASE("session id overruns the hello", BODY, "0303 z32; 20 z5;", C_BAD,
	     "malformed legacy_session_id"),
	CASE("no cipher suites", BODY, "0303 z32; {1 } {2 } {1 00}", C_BAD,
	     "malformed cipher_suites"),
	CASE("odd cipher_suites length", BODY,
	     "0303 z32; {1 } {2 130100} {1 00}",
	     C_BAD, "malformed cipher_suites"),
	CASE("cipher_suites overrun the hello", BODY, "0303 z32; 00 0010 1301",
	     C_BAD, "malformed cipher_suites"),
	CASE("no compression methods", BODY, "0303 z32; {1 } {2 1301} {1 }",
	     C_BAD, "malformed legacy_compression_methods"),
	CASE("compression methods overrun", BODY,
	     "0303 z32; {1 } {2 1301} 05 00",
	     C_BAD, "malformed legacy_compression_methods"),
	CASE("one byte where extensions start", BODY, HELLO_PRE "00", C_BAD,
	     "extensions overrun the ClientHello"),
	CASE("extensions overrun the hello", BODY, HELLO_PRE "0010 0000 0000",
	     C_BAD, "extensions overrun the ClientHello"),
	CASE("trailing junk after the extensions", BODY,
	     EXTS(SNI("a.example")) "00", C_BAD,
	     "trailing data after the extensions"),
	CASE("truncated extension header", BODY, EXTS("0000 00"), C_BAD,
	     "truncated extension"),
	CASE("extension data overruns the block", BODY,
	     EXTS(SNI("a.example") "0010 0010 00"), C_BAD,
	     "truncated extension"),
	CASE("duplicate server_name", BODY,
	     EXTS(SNI("a.example") SNI("b.example")), C_BAD,
	     "duplicate extension"),
	CASE("duplicate unknown extension", BODY,
	     EXTS("ff01 {2 00} " SNI("a.example") "ff01 {2 00}"), C_BAD,
	     "duplicate extension"),
	CASE("duplicate extension 0xffff", BODY, EXTS("ffff {2 } ffff {2 }"),
	     C_BAD, "duplicate extension"),
	CASE("duplicate supported_versions", BODY, EXTS(SV13 SV13), C_BAD,
	     "duplicate extension"),
	CASE("duplicate encrypted_client_hello", BODY,
	     EXTS(SNI("a.example") ECH_OUTER ECH_OUTER), C_BAD,
	     "duplicate extension"),

	/* server_name. */
	CASE("empty server_name extension", BODY, EXTS("0000 {2 }"), C_BAD,
	     "malformed server_name extension"),
	CASE("empty server_name list", BODY, EXTS("0000 {2 {2 }}"), C_BAD,
	     "malformed server_name extension"),
	CASE("server_name list shorter than its extension", BODY,
	     EXTS("0000 {2 {2 00 {2 'a.example'}} 00}"), C_BAD,
	     "malformed server_name extension"),
	CASE("host name overruns the list", BODY,
	     EXTS("0000 {2 {2 00 0020 'a.example'}}"), C_BAD,
	     "malformed server_name extension"),
	CASE("name_type without a name", BODY, EXTS("0000 {2 {2 00}}"), C_BAD,
	     "malformed server_name extension"),
	CASE("two server_name entries", BODY,
	     EXTS("0000 {2 {2 00 {2 'a.example'} 00 {2 'b.example'}}}"), C_BAD,
	     "more than one server_name entry"),
	CASE("name_type 1", BODY, EXTS("0000 {2 {2 01 {2 'a.example'}}}"),
	     C_BAD, "server_name type is not host_name"),
	CASE("name_type 255 after host_name", BODY,
	     EXTS("0000 {2 {2 ff {2 'x'} 00 {2 'a.example'}}}"), C_BAD,
	     "server_name type is not host_name"),
	CASE("empty host name", BODY, EXTS(SNI("")), C_BAD,
	     "empty SNI host name"),
	CASE("trailing dot", BODY, EXTS(SNI("example.com.")), C_BAD,
	     "SNI ends with a dot"),
	CASE("a lone dot", BODY, EXTS(SNI(".")), C_BAD, "SNI ends with a dot"),
	CASE("IPv4 literal", BODY, EXTS(SNI("10.0.0.1")), C_BAD,
	     "SNI is an IP literal"),
	CASE("IPv4 short form 127.1", BODY, EXTS(SNI("127.1")), C_BAD,
	     "SNI is an IP literal"),
	CASE("IPv4 as one integer", BODY, EXTS(SNI("2130706433")), C_BAD,
	     "SNI is an IP literal"),
	CASE("IPv4 in hex", BODY, EXTS(SNI("0x7f.0.0.1")), C_BAD,
	     "SNI is an IP literal"),
	CASE("IPv6 literal in brackets", BODY, EXTS(SNI("[::1]")), C_BAD,
	     "SNI is an IP literal"),
	CASE("bare IPv6 literal", BODY, EXTS(SNI("::1")), C_BAD,
	     "SNI is not a valid DNS name", .herr = H(BAD_BRACKETS)),
	CASE("numeric last label", BODY, EXTS(SNI("foo.123")), C_BAD,
	     "SNI is not a valid DNS name", .herr = H(BAD_IPV4)),
	CASE("NUL inside the name", BODY, EXTS(SNI_RAW("'exa' 00 'mple.com'")),
	     C_BAD, "SNI is not a valid DNS name", .herr = H(BAD_CHAR)),
	CASE("non-ASCII name", BODY, EXTS(SNI_RAW("'b' c3bc 'cher.example'")),
	     C_BAD, "SNI is not a valid DNS name", .herr = H(NON_ASCII)),
	CASE("empty label", BODY, EXTS(SNI("a..example")), C_BAD,
	     "SNI is not a valid DNS name", .herr = H(LABEL_EMPTY)),
	CASE("leading dot", BODY, EXTS(SNI(".example.com")), C_BAD,
	     "SNI is not a valid DNS name", .herr = H(LABEL_EMPTY)),
	CASE("label starting with a hyphen", BODY, EXTS(SNI("-a.example")),
	     C_BAD, "SNI is not a valid DNS name", .herr = H(HYPHEN)),
	CASE("space in the name", BODY, EXTS(SNI("exa mple.com")), C_BAD,
	     "SNI is not a valid DNS name", .herr = H(BAD_CHAR)),
	CASE("user-info in the name", BODY, EXTS(SNI("user@example.com")),
	     C_BAD, "SNI is not a valid DNS name", .herr = H(USERINFO)),
	CASE("percent-escape in the name", BODY, EXTS(SNI("exa%41mple.com")),
	     C_BAD, "SNI is not a valid DNS name", .herr = H(PERCENT)),
	CASE("port in the name", BODY, EXTS(SNI("example.com:443")), C_BAD,
	     "SNI is not a valid DNS name", .herr = H(BAD_CHAR)),

	/* ALPN. */
	CASE("empty ALPN extension", BODY, EXTS("0010 {2 }"), C_BAD,
	     "malformed ALPN extension"),
	CASE("empty ALPN list", BODY, EXTS("0010 {2 {2 }}"), C_BAD,
	     "malformed ALPN extension"),
	CASE("empty ALPN protocol name", BODY, EXTS("0010 {2 {2 00 {1 'h2'}}}"),
	     C_BAD, "empty ALPN protocol name"),
	CASE("ALPN name overruns the list", BODY, EXTS("0010 {2 {2 05 'h2'}}"),
	     C_BAD, "malformed ALPN extension"),
	CASE("junk after the ALPN list", BODY, EXTS("0010 {2 {2 {1 'h2'}} 00}"),
	     C_BAD, "malformed ALPN extension"),

	/* supported_versions. */
	CASE("empty supported_versions", BODY, EXTS("002b {2 }"), C_BAD,
	     "malformed supported_versions extension"),
	CASE("empty supported_versions list", BODY, EXTS("002b {2 {1 }}"),
	     C_BAD, "malformed supported_versions extension"),
	CASE("odd supported_versions list", BODY, EXTS("002b {2 {1 030403}}"),
	     C_BAD, "malformed supported_versions extension"),
	CASE("junk after the versions list", BODY, EXTS("002b {2 {1 0304} 00}"),
	     C_BAD, "malformed supported_versions extension"),
	CASE("versions list overruns", BODY, EXTS("002b {2 08 0304}"), C_BAD,
	     "malformed supported_versions extension"),
};

static uint8_t buf[BUF_MAX], tmp[BUF_MAX];

/* Builds a case's first flight into buf; returns its length. */
static size_t build_case(const struct tcase *tc)
{
	size_t n;

	if (tc->kind == FLIGHT)
		return build(tc->spec, buf, sizeof(buf));
	n = build(tc->spec, tmp, sizeof(tmp));
	n = handshake(tmp, n, tmp, sizeof(tmp));
	return frame(tmp, n, NULL, 0, buf, sizeof(buf));
}

static void join_alpn(const struct clienthello *h, char *out, size_t len)
{
	size_t i, o = 0;

	out[0] = '\0';
	for (i = 0; i < h->alpn_count && i < CLIENTHELLO_ALPN_MAX; i++) {
		int w = snprintf(out + o, len - o, "%s%s", i ? "," : "",
				 h->alpn[i].name);

		ASSERT(w >= 0 && (size_t)w < len - o);
		o += (size_t)w;
	}
}

static void check_case(const struct tcase *tc)
{
	struct clienthello h;
	enum clienthello_result r;
	char alpn[1200], why[1400] = "";
	size_t n = build_case(tc);

	r = parse_copy(buf, n, &h);
	join_alpn(&h, alpn, sizeof(alpn));
	if (r != tc->want)
		snprintf(why, sizeof(why), "result %s (%s)",
			 clienthello_result_to_string(r), h.reason);
	else if (h.sni_error != tc->herr)
		snprintf(why, sizeof(why), "sni_error %s",
			 hostname_error_to_string(h.sni_error));
	else if (r == C_INC && h.need != tc->need)
		snprintf(why, sizeof(why), "need %zu, want %zu", h.need,
			 tc->need);
	else if ((r == C_NOT || r == C_BAD) &&
		 strcmp(h.reason, tc->detail) != 0)
		snprintf(why, sizeof(why), "reason '%s'", h.reason);
	else if (r == C_OK && strcmp(h.sni, tc->detail) != 0)
		snprintf(why, sizeof(why), "sni '%s'", h.sni);
	else if (r == C_OK && h.has_sni != (tc->detail[0] != '\0'))
		snprintf(why, sizeof(why), "has_sni %d", h.has_sni);
	else if (r == C_OK && tc->tls13 && h.offers_tls13 != (tc->tls13 == YES))
		snprintf(why, sizeof(why), "offers_tls13 %d", h.offers_tls13);
	else if (r == C_OK && tc->ech && h.has_ech != (tc->ech == YES))
		snprintf(why, sizeof(why), "has_ech %d", h.has_ech);
	else if (r == C_OK && !tc->alpn && h.alpn_count != 0)
		snprintf(why, sizeof(why), "alpn_count %zu", h.alpn_count);
	else if (r == C_OK && tc->alpn &&
		 (strcmp(alpn, tc->alpn) != 0 ||
		  h.alpn_count != (tc->alpn_count ? tc->alpn_count
						  : h.alpn_count)))
		snprintf(why, sizeof(why), "alpn '%s' (%zu)", alpn,
			 h.alpn_count);
	else if (r == C_OK && h.length != (tc->length ? tc->length : n))
		snprintf(why, sizeof(why), "length %zu", h.length);
	else if (r == C_OK && h.records != (tc->records ? tc->records : 1))
		snprintf(why, sizeof(why), "records %u", h.records);
	else if (r == C_OK && (h.legacy_version >> 8) != 3)
		snprintf(why, sizeof(why), "legacy_version %04x",
			 h.legacy_version);
	if (!tap_ok(why[0] == '\0', "%s: %s", tc->name,
		    clienthello_result_to_string(tc->want)))
		tap_diag("  got %s", why);
	tap_ok(check_prefixes(buf, n, tc->name),
	       "%s: every TCP split is INCOMPLETE, then the same answer",
	       tc->name);
}

/* ------------------------------------------------------------------ */
/* Generated cases.                                                     */

/* Builds into tmp a ClientHello handshake message of exactly @msg_len
 * bytes with SNI @sni, padded by a padding extension (type 21). */
static size_t padded_message(size_t msg_len, const char *sni)
{
	char spec[512];
	size_t base, n;

	snprintf(spec, sizeof(spec),
		 HELLO_PRE "{2 0000 {2 {2 00 {2 '%s'}}} 0015 {2 z%zu;}}", sni,
		 (size_t)0);
	base = build(spec, tmp, sizeof(tmp)) + 4;
	ASSERT(msg_len >= base);
	snprintf(spec, sizeof(spec),
		 HELLO_PRE "{2 0000 {2 {2 00 {2 '%s'}}} 0015 {2 z%zu;}}", sni,
		 msg_len - base);
	n = build(spec, tmp, sizeof(tmp));
	n = handshake(tmp, n, tmp, sizeof(tmp));
	ASSERT(n == msg_len);
	return n;
}

/* The handshake message of a one-record real hello, into tmp. */
static size_t real_message(const char *hex)
{
	size_t n = build(hex, buf, sizeof(buf));

	ASSERT(n > 5 && (size_t)(buf[3] << 8 | buf[4]) == n - 5);
	memcpy(tmp, buf + 5, n - 5);
	return n - 5;
}

static void test_fragmentation(void)
{
	static const size_t two[] = { 1, 2, 3, 4, 5, 38, 100, 311 };
	static const size_t three[][2] = { { 1, 4 }, { 2, 200 }, { 100, 101 },
					   { 3, 311 } };
	struct clienthello want, h;
	enum clienthello_result r;
	size_t m, n, i, k;

	m = real_message(openssl_sni13);
	ASSERT(m == 312);
	n = frame(tmp, m, NULL, 0, buf, sizeof(buf));
	ASSERT(clienthello_parse(buf, n, &want) == C_OK);
	for (i = 0; i < ARRAY_SIZE(two); i++) {
		n = frame(tmp, m, &two[i], 1, buf, sizeof(buf));
		r = parse_copy(buf, n, &h);
		want.length = n;
		want.records = 2;
		tap_ok(same_answer(r, &h, C_OK, &want),
		       "two records split at %zu: same hello", two[i]);
		tap_ok(check_prefixes(buf, n, "two records"),
		       "two records split at %zu: every TCP split", two[i]);
	}
	for (i = 0; i < ARRAY_SIZE(three); i++) {
		n = frame(tmp, m, three[i], 2, buf, sizeof(buf));
		r = parse_copy(buf, n, &h);
		want.length = n;
		want.records = 3;
		tap_ok(same_answer(r, &h, C_OK, &want) &&
			       check_prefixes(buf, n, "three records"),
		       "three records split at %zu and %zu: same hello, "
		       "every TCP split", three[i][0], three[i][1]);
	}
	for (k = 1; k <= CLIENTHELLO_MAX_RECORDS; k++) {
		n = frame_even(tmp, m, k, buf, sizeof(buf));
		r = parse_copy(buf, n, &h);
		want.length = n;
		want.records = (unsigned int)k;
		if (!same_answer(r, &h, C_OK, &want))
			break;
	}
	tap_ok(k == CLIENTHELLO_MAX_RECORDS + 1,
	       "1..%d records: same hello", CLIENTHELLO_MAX_RECORDS);
	n = frame_even(tmp, m, CLIENTHELLO_MAX_RECORDS + 1, buf, sizeof(buf));
	r = parse_copy(buf, n, &h);
	tap_ok(r == C_BAD &&
		       strcmp(h.reason, "ClientHello spans too many records") ==
			       0,
	       "%d records: MALFORMED (%s)", CLIENTHELLO_MAX_RECORDS + 1,
	       h.reason);
	tap_ok(check_prefixes(buf, n, "17 records"),
	       "17 records: every TCP split");
	/* One-byte records (a DPI-evasion trick): refused as soon as 16
	 * records have not finished the message, without waiting for more. */
	{
		size_t cuts[40];

		for (i = 0; i < ARRAY_SIZE(cuts); i++)
			cuts[i] = i + 1;
		const size_t sixteen = CLIENTHELLO_MAX_RECORDS * (size_t)6;

		ASSERT(frame(tmp, m, cuts, ARRAY_SIZE(cuts), buf,
			     sizeof(buf)) > sixteen);
		r = parse_copy(buf, sixteen - 1, &h);
		tap_ok(r == C_INC && h.need == 1,
		       "one-byte records: 15 and a half are INCOMPLETE");
		r = parse_copy(buf, sixteen, &h);
		tap_ok(r == C_BAD && strcmp(h.reason, "ClientHello spans too "
						      "many records") == 0,
		       "one-byte records: 16 are MALFORMED");
	}

	/* The real two-record hello, re-framed into one record. */
	n = build(openssl_frag, buf, sizeof(buf));
	ASSERT(clienthello_parse(buf, n, &want) == C_OK);
	memcpy(tmp, buf + 5, 512);
	memcpy(tmp + 512, buf + 5 + 512 + 5, 6);
	m = 518;
	n = frame(tmp, m, NULL, 0, buf, sizeof(buf));
	r = parse_copy(buf, n, &h);
	want.length = n;
	want.records = 1;
	tap_ok(same_answer(r, &h, C_OK, &want),
	       "real two-record hello in one record: same hello");
}

static void test_limits(void)
{
	struct clienthello h;
	enum clienthello_result r;
	size_t m, n, cut[3] = { 16384, 32768, 49152 };

	m = padded_message(CLIENTHELLO_MAX_RECORD, "max.example");
	n = frame(tmp, m, NULL, 0, buf, sizeof(buf));
	r = parse_copy(buf, n, &h);
	tap_ok(r == C_OK && h.length == 16389 &&
		       strcmp(h.sni, "max.example") == 0,
	       "a record of exactly 2^14 bytes: OK");

	m = padded_message(CLIENTHELLO_MAX_MESSAGE, "max.example");
	n = frame(tmp, m, cut, 3, buf, sizeof(buf));
	r = parse_copy(buf, n, &h);
	tap_ok(r == C_OK && h.records == 4 && h.length == 65536 + 20,
	       "a 64 KiB ClientHello in four full records: OK");
	n = frame_even(tmp, m, CLIENTHELLO_MAX_RECORDS, buf, sizeof(buf));
	tap_is_int(n, CLIENTHELLO_FLIGHT_MAX,
		   "64 KiB in 16 records is CLIENTHELLO_FLIGHT_MAX bytes");
	r = parse_copy(buf, n, &h);
	tap_ok(r == C_OK && h.records == 16 && h.length == n,
	       "a 64 KiB ClientHello in 16 records: OK");
	r = parse_copy(buf, n - 1, &h);
	tap_ok(r == C_INC && h.need == 1,
	       "... one byte short: INCOMPLETE, need 1");
	tap_ok(check_prefixes(buf, n, "64 KiB in 16 records"),
	       "... sampled TCP splits");

	m = padded_message(CLIENTHELLO_MAX_RECORD + 1, "max.example");
	n = frame(tmp, m, NULL, 0, buf, sizeof(buf));
	r = parse_copy(buf, n, &h);
	tap_ok(r == C_BAD &&
		       strcmp(h.reason, "record longer than 2^14 bytes") == 0,
	       "a record of 2^14 + 1 bytes: MALFORMED");
	cut[0] = 16384;
	n = frame(tmp, m, cut, 1, buf, sizeof(buf));
	r = parse_copy(buf, n, &h);
	tap_ok(r == C_OK, "the same hello in two records: OK");

	/* Any buffer of CLIENTHELLO_FLIGHT_MAX bytes gets a final answer. */
	memset(buf, 0, CLIENTHELLO_FLIGHT_MAX);
	buf[0] = 0x16;
	buf[1] = 3;
	buf[2] = 1;
	buf[3] = 0x40;
	buf[4] = 0x00;
	buf[5] = 1;
	buf[6] = 0;
	buf[7] = 0xff;
	buf[8] = 0xfc; /* a 65536-byte message */
	r = parse_copy(buf, CLIENTHELLO_FLIGHT_MAX, &h);
	tap_ok(r != C_INC, "a CLIENTHELLO_FLIGHT_MAX buffer is never "
			   "INCOMPLETE (%s)", h.reason);
}

static void test_sni_lengths(void)
{
	static char spec[1024], name[300];
	struct clienthello h;
	enum clienthello_result r;
	size_t n, i;

	/* 63 + 1 + 63 + 1 + 63 + 1 + 61 = 253 bytes. */
	for (i = 0; i < 253; i++)
		name[i] = (i % 64 == 63) ? '.' : 'a';
	name[253] = '\0';
	snprintf(spec, sizeof(spec), EXTS(SNI("%s")), name);
	n = build(spec, tmp, sizeof(tmp));
	n = handshake(tmp, n, tmp, sizeof(tmp));
	n = frame(tmp, n, NULL, 0, buf, sizeof(buf));
	r = parse_copy(buf, n, &h);
	tap_ok(r == C_OK && strcmp(h.sni, name) == 0,
	       "SNI of 253 bytes: OK");

	name[253] = 'a';
	name[254] = '\0';
	snprintf(spec, sizeof(spec), EXTS(SNI("%s")), name);
	n = build(spec, tmp, sizeof(tmp));
	n = handshake(tmp, n, tmp, sizeof(tmp));
	n = frame(tmp, n, NULL, 0, buf, sizeof(buf));
	r = parse_copy(buf, n, &h);
	tap_ok(r == C_BAD && h.sni_error == HOSTNAME_TOO_LONG,
	       "SNI of 254 bytes: MALFORMED, too long");

	memset(name, 'b', 64);
	memcpy(name + 64, ".example", 9);
	snprintf(spec, sizeof(spec), EXTS(SNI("%s")), name);
	n = build(spec, tmp, sizeof(tmp));
	n = handshake(tmp, n, tmp, sizeof(tmp));
	n = frame(tmp, n, NULL, 0, buf, sizeof(buf));
	r = parse_copy(buf, n, &h);
	tap_ok(r == C_BAD && h.sni_error == HOSTNAME_LABEL_TOO_LONG,
	       "SNI with a 64-byte label: MALFORMED");

	memset(name, 'c', 299);
	name[299] = '\0';
	snprintf(spec, sizeof(spec), EXTS(SNI("%s")), name);
	n = build(spec, tmp, sizeof(tmp));
	n = handshake(tmp, n, tmp, sizeof(tmp));
	n = frame(tmp, n, NULL, 0, buf, sizeof(buf));
	r = parse_copy(buf, n, &h);
	tap_ok(r == C_BAD && h.sni_error == HOSTNAME_TOO_LONG &&
		       strcmp(h.reason, "SNI is not a valid DNS name") == 0,
	       "SNI of 299 bytes: MALFORMED, too long");
}

/* The proxy's loop: append what one read() brought, parse again. */
static void test_chunked_reads(void)
{
	static const char *const reals[] = { openssl_sni13, openssl_frag,
					     openssl_psk, curl_h2 };
	size_t i;
	uint32_t seed = 12345;

	for (i = 0; i < ARRAY_SIZE(reals); i++) {
		struct clienthello whole, h;
		enum clienthello_result rw, r = C_INC;
		size_t n = build(reals[i], buf, sizeof(buf)), have = 0;
		size_t calls = 0, calls_need = 0;
		bool ok = true;

		rw = clienthello_parse(buf, n, &whole);
		while (have < n) {
			seed = seed * 1103515245u + 12345u;
			have += 1 + (seed >> 16) % 64;
			if (have > n)
				have = n;
			r = parse_copy(buf, have, &h);
			calls++;
			if (r != C_INC)
				break;
			if (have + h.need > n && rw != C_INC)
				ok = false;
		}
		ok = ok && same_answer(r, &h, rw, &whole);
		/* Reading exactly what `need` asks for. */
		for (have = 0;;) {
			r = parse_copy(buf, have, &h);
			calls_need++;
			if (r != C_INC)
				break;
			have += h.need;
			ASSERT(have <= n);
		}
		ok = ok && same_answer(r, &h, rw, &whole);
		tap_ok(ok, "real hello %zu in random reads (%zu calls) and in "
			   "reads of `need` bytes (%zu calls): same answer",
		       i, calls, calls_need);
	}
}

static void test_misc(void)
{
	struct clienthello h;
	const char *seen[CLIENTHELLO_RESULT_COUNT];
	bool ok = true;
	size_t i, j;

	for (i = 0; i < CLIENTHELLO_RESULT_COUNT; i++) {
		seen[i] = clienthello_result_to_string(
			(enum clienthello_result)i);
		ok = ok && seen[i] && seen[i][0] &&
		     strcmp(seen[i], "unknown result") != 0;
		for (j = 0; j < i; j++)
			ok = ok && strcmp(seen[i], seen[j]) != 0;
	}
	tap_ok(ok, "every result has its own name");
	tap_is_str(clienthello_result_to_string(CLIENTHELLO_RESULT_COUNT),
		   "unknown result", "out-of-range result");
	tap_ok(clienthello_parse(NULL, 0, &h) == C_INC && h.need == 1,
	       "NULL, 0: INCOMPLETE, need 1");
}

/* A server's first flight: one handshake record holding a ServerHello
 * (legacy_version 0x0303) with @random. */
static size_t server_hello(uint8_t *out, const uint8_t *random)
{
	static const uint8_t tail[] = { 0x00, 0x13, 0x01, 0x00, 0x00, 0x06,
					0x00, 0x2b, 0x00, 0x02, 0x03, 0x04 };
	size_t body = 2 + 32 + sizeof(tail), n = 0;

	out[n++] = 22;
	out[n++] = 3;
	out[n++] = 3;
	out[n++] = (uint8_t)((4 + body) >> 8);
	out[n++] = (uint8_t)(4 + body);
	out[n++] = 2;
	out[n++] = 0;
	out[n++] = (uint8_t)(body >> 8);
	out[n++] = (uint8_t)body;
	out[n++] = 3;
	out[n++] = 3;
	memcpy(out + n, random, 32);
	n += 32;
	memcpy(out + n, tail, sizeof(tail));
	return n + sizeof(tail);
}

static enum serverhello_kind feed_split(const uint8_t *d, size_t n, size_t step)
{
	struct serverhello_watch w;
	enum serverhello_kind k = SERVERHELLO_MORE;
	size_t i;

	serverhello_watch_init(&w);
	for (i = 0; i < n; i += step)
		k = serverhello_watch_feed(&w, d + i, n - i < step ? n - i : step);
	return k;
}

static void test_server_hello(void)
{
	static const uint8_t hrr[32] = {
		0xcf, 0x21, 0xad, 0x74, 0xe5, 0x9a, 0x61, 0x11, 0xbe, 0x1d, 0x8c,
		0x02, 0x1e, 0x65, 0xb8, 0x91, 0xc2, 0xa2, 0x11, 0x16, 0x7a, 0xbb,
		0x8c, 0x5e, 0x07, 0x9e, 0x09, 0xe2, 0xc8, 0xa8, 0x33, 0x9c,
	};
	uint8_t other[32], sh[256], frag[512];
	struct serverhello_watch w;
	size_t n, i, m;
	int r;

	memset(other, 0x5a, sizeof(other));
	n = server_hello(sh, hrr);
	tap_ok(feed_split(sh, n, n) == SERVERHELLO_RETRY, "a HelloRetryRequest in one read");
	tap_ok(feed_split(sh, n, 1) == SERVERHELLO_RETRY, "... one byte per read");
	tap_ok(feed_split(sh, 42, 42) == SERVERHELLO_MORE &&
		       feed_split(sh, 43, 43) == SERVERHELLO_RETRY,
	       "known after exactly 5 + 38 bytes, not before");
	n = server_hello(sh, other);
	tap_ok(feed_split(sh, n, 1) == SERVERHELLO_OTHER, "a ServerHello: other");
	/* the same HelloRetryRequest cut into records of 3 bytes each */
	n = server_hello(sh, hrr);
	for (i = 5, m = 0; i < n; i += 3) {
		size_t k = n - i < 3 ? n - i : 3;

		frag[m++] = 22;
		frag[m++] = 3;
		frag[m++] = 3;
		frag[m++] = 0;
		frag[m++] = (uint8_t)k;
		memcpy(frag + m, sh + i, k);
		m += k;
	}
	tap_ok(feed_split(frag, m, 7) == SERVERHELLO_RETRY,
	       "a HelloRetryRequest spread over 3-byte records");
	sh[0] = 21; /* an alert first */
	tap_ok(feed_split(sh, 5, 5) == SERVERHELLO_OTHER, "an alert first: other");
	n = server_hello(sh, hrr);
	sh[5] = 1; /* not a ServerHello */
	tap_ok(feed_split(sh, n, n) == SERVERHELLO_OTHER, "another handshake message: other");
	/* 65 empty handshake records: over the bound */
	for (i = 0; i < 65; i++)
		memcpy(frag + 5 * i, "\x16\x03\x03\x00\x00", 5);
	tap_ok(feed_split(frag, 5 * 64, 5) == SERVERHELLO_MORE &&
		       feed_split(frag, 5 * 65, 5) == SERVERHELLO_OTHER,
	       "more than %d records before the hello: other", SERVERHELLO_RECORDS_MAX);
	serverhello_watch_init(&w);
	n = server_hello(sh, hrr);
	(void)serverhello_watch_feed(&w, sh, n);
	tap_ok(serverhello_watch_feed(&w, sh, n) == SERVERHELLO_RETRY &&
		       serverhello_watch_feed(&w, NULL, 0) == SERVERHELLO_RETRY,
	       "the answer is final");
	tap_is_str(serverhello_kind_to_string(SERVERHELLO_RETRY), "hello-retry-request",
		   "kind name");

	/* the client's side: records to skip before the second hello */
	memcpy(sh, "\x14\x03\x03\x00\x01\x01", 6);      /* change_cipher_spec */
	memcpy(sh + 6, "\x17\x03\x03\x00\x02" "ab", 7);     /* early data */
	memcpy(sh + 13, "\x16\x03\x01\x00\x04", 5);      /* a handshake record */
	r = clienthello_next_hello(sh, 18, &n);
	tap_ok(r == 1 && n == 13, "CCS and early data skipped: the hello is at 13 (%d, %zu)", r,
	       n);
	r = clienthello_next_hello(sh, 16, &n);
	tap_ok(r == 0, "its record header not whole yet: more");
	r = clienthello_next_hello(sh, 3, &n);
	tap_ok(r == 0, "a CCS record not whole yet: more");
	sh[13] = 21;
	r = clienthello_next_hello(sh, 18, &n);
	tap_ok(r == -1 && n == 13, "an alert instead: no second hello");
}

int main(void)
{
	size_t i;

	test_server_hello();
	for (i = 0; i < ARRAY_SIZE(cases); i++)
		check_case(&cases[i]);
	tap_diag("%zu table cases", ARRAY_SIZE(cases));
	test_fragmentation();
	test_limits();
	test_sni_lengths();
	test_chunked_reads();
	test_misc();
	return tap_done();
}
