/* runtime/gen/rt_tokenizer_bpe.c: encoding with a tokenizer.json's byte-level
 * BPE, as Hugging Face's tokenizers does (and a GGUF's, as llama.cpp).
 *
 * Contract (rt_tok.h, rt_tok_encode_bpe):
 *   1. the text must be valid UTF-8 (a Python or Rust string is);
 *   2. added tokens are taken out first, whole: scanning from the left,
 *      the longest one that starts at a place, with the spaces (Unicode
 *      White_Space; a GGUF's: ASCII's, as llama.cpp's isspace) before it
 *      when lstrip, after it when rstrip;
 *   3. the text between them is cut into pieces by the pre-tokenizer's
 *      pattern (GPT-2's, or Qwen2's and Llama 3's, rt_tokenizer_hf.c; with
 *      Digits first, in each stretch between the numbers it cuts out),
 *      written out by hand below: at each place, the pattern's
 *      alternatives in order, each with the regex's greedy matching and
 *      backtracking worked out;
 *   4. a piece's bytes become one token each; then, while some adjacent
 *      pair is a merge, the pair of lowest rank (the leftmost of equals)
 *      becomes its token. With ignore_merges a piece that is a token is
 *      taken whole.
 * What is approximated:
 *   - \p{L}, \p{N} (and Digits' is_numeric, category N too) are Unicode
 *     14.0's general categories L and N (the tables below, made with
 *     Python 3.11's unicodedata, and checked against it for every
 *     assigned code point); a code point unassigned
 *     in 14.0 takes a class of its neighbours', where HF's newer tables
 *     may know it as a letter. \s is White_Space, as in the Rust regex
 *     tokenizers uses (U+001C..U+001F are not spaces);
 *   - (?i:'s|...) folds case as Unicode's simple folding for these
 *     letters: ASCII either case, and U+017F (long s) for s;
 *   - the NFC normalizer (Qwen2) is taken as already true of the text:
 *     typed or pasted text almost always is; a decomposed sequence (e and
 *     U+0301) stays decomposed, so it encodes differently from HF;
 *   - HF takes out added tokens marked normalized after the others; with
 *     no normalizer at work this differs only where two added tokens
 *     overlap in the text.
 * Merging is quadratic in a piece's length; pieces are words, but a run
 * of spaces (and with GPT-2's pattern a run of digits) is one piece. */
#include "runtime/gen/rt_tok.h"

#include <stdlib.h>
#include <string.h>

enum { BPE_OTHER, BPE_LETTER, BPE_NUMBER, BPE_SPACE };

/* Code points from U+0080 of general category L (letters) and N (numbers)
 * in Unicode 14.0, unassigned ones joining a neighbouring range:
 *   python3 -c 'import unicodedata as u; ...' (category(chr(c))[0] in
 *   "L" / "N" for c in 0x80..0x10FFFF, skipping category "Cn") */
static const uint32_t bpe_letters[][2] = {
    {0xAA, 0xAA}, {0xB5, 0xB5}, {0xBA, 0xBA}, {0xC0, 0xD6}, {0xD8, 0xF6}, {0xF8, 0x2C1},
    {0x2C6, 0x2D1}, {0x2E0, 0x2E4}, {0x2EC, 0x2EC}, {0x2EE, 0x2EE}, {0x370, 0x374}, {0x376, 0x37D},
    {0x37F, 0x37F}, {0x386, 0x386}, {0x388, 0x3F5}, {0x3F7, 0x481}, {0x48A, 0x559}, {0x560, 0x588},
    {0x5D0, 0x5F2}, {0x620, 0x64A}, {0x66E, 0x66F}, {0x671, 0x6D3}, {0x6D5, 0x6D5}, {0x6E5, 0x6E6},
    {0x6EE, 0x6EF}, {0x6FA, 0x6FC}, {0x6FF, 0x6FF}, {0x710, 0x710}, {0x712, 0x72F}, {0x74D, 0x7A5},
    {0x7B1, 0x7B1}, {0x7CA, 0x7EA}, {0x7F4, 0x7F5}, {0x7FA, 0x7FA}, {0x800, 0x815}, {0x81A, 0x81A},
    {0x824, 0x824}, {0x828, 0x828}, {0x840, 0x858}, {0x860, 0x887}, {0x889, 0x88E}, {0x8A0, 0x8C9},
    {0x904, 0x939}, {0x93D, 0x93D}, {0x950, 0x950}, {0x958, 0x961}, {0x971, 0x980}, {0x985, 0x9B9},
    {0x9BD, 0x9BD}, {0x9CE, 0x9CE}, {0x9DC, 0x9E1}, {0x9F0, 0x9F1}, {0x9FC, 0x9FC}, {0xA05, 0xA39},
    {0xA59, 0xA5E}, {0xA72, 0xA74}, {0xA85, 0xAB9}, {0xABD, 0xABD}, {0xAD0, 0xAE1}, {0xAF9, 0xAF9},
    {0xB05, 0xB39}, {0xB3D, 0xB3D}, {0xB5C, 0xB61}, {0xB71, 0xB71}, {0xB83, 0xBB9}, {0xBD0, 0xBD0},
    {0xC05, 0xC39}, {0xC3D, 0xC3D}, {0xC58, 0xC61}, {0xC80, 0xC80}, {0xC85, 0xCB9}, {0xCBD, 0xCBD},
    {0xCDD, 0xCE1}, {0xCF1, 0xCF2}, {0xD04, 0xD3A}, {0xD3D, 0xD3D}, {0xD4E, 0xD4E}, {0xD54, 0xD56},
    {0xD5F, 0xD61}, {0xD7A, 0xD7F}, {0xD85, 0xDC6}, {0xE01, 0xE30}, {0xE32, 0xE33}, {0xE40, 0xE46},
    {0xE81, 0xEB0}, {0xEB2, 0xEB3}, {0xEBD, 0xEC6}, {0xEDC, 0xF00}, {0xF40, 0xF6C}, {0xF88, 0xF8C},
    {0x1000, 0x102A}, {0x103F, 0x103F}, {0x1050, 0x1055}, {0x105A, 0x105D}, {0x1061, 0x1061},
    {0x1065, 0x1066}, {0x106E, 0x1070}, {0x1075, 0x1081}, {0x108E, 0x108E}, {0x10A0, 0x10FA},
    {0x10FC, 0x135A}, {0x1380, 0x138F}, {0x13A0, 0x13FD}, {0x1401, 0x166C}, {0x166F, 0x167F},
    {0x1681, 0x169A}, {0x16A0, 0x16EA}, {0x16F1, 0x1711}, {0x171F, 0x1731}, {0x1740, 0x1751},
    {0x1760, 0x1770}, {0x1780, 0x17B3}, {0x17D7, 0x17D7}, {0x17DC, 0x17DC}, {0x1820, 0x1884},
    {0x1887, 0x18A8}, {0x18AA, 0x191E}, {0x1950, 0x19C9}, {0x1A00, 0x1A16}, {0x1A20, 0x1A54},
    {0x1AA7, 0x1AA7}, {0x1B05, 0x1B33}, {0x1B45, 0x1B4C}, {0x1B83, 0x1BA0}, {0x1BAE, 0x1BAF},
    {0x1BBA, 0x1BE5}, {0x1C00, 0x1C23}, {0x1C4D, 0x1C4F}, {0x1C5A, 0x1C7D}, {0x1C80, 0x1CBF},
    {0x1CE9, 0x1CEC}, {0x1CEE, 0x1CF3}, {0x1CF5, 0x1CF6}, {0x1CFA, 0x1DBF}, {0x1E00, 0x1FBC},
    {0x1FBE, 0x1FBE}, {0x1FC2, 0x1FCC}, {0x1FD0, 0x1FDB}, {0x1FE0, 0x1FEC}, {0x1FF2, 0x1FFC},
    {0x2071, 0x2071}, {0x207F, 0x207F}, {0x2090, 0x209C}, {0x2102, 0x2102}, {0x2107, 0x2107},
    {0x210A, 0x2113}, {0x2115, 0x2115}, {0x2119, 0x211D}, {0x2124, 0x2124}, {0x2126, 0x2126},
    {0x2128, 0x2128}, {0x212A, 0x212D}, {0x212F, 0x2139}, {0x213C, 0x213F}, {0x2145, 0x2149},
    {0x214E, 0x214E}, {0x2183, 0x2184}, {0x2C00, 0x2CE4}, {0x2CEB, 0x2CEE}, {0x2CF2, 0x2CF3},
    {0x2D00, 0x2D6F}, {0x2D80, 0x2DDE}, {0x2E2F, 0x2E2F}, {0x3005, 0x3006}, {0x3031, 0x3035},
    {0x303B, 0x303C}, {0x3041, 0x3096}, {0x309D, 0x309F}, {0x30A1, 0x30FA}, {0x30FC, 0x318E},
    {0x31A0, 0x31BF}, {0x31F0, 0x31FF}, {0x3400, 0x4DBF}, {0x4E00, 0xA48C}, {0xA4D0, 0xA4FD},
    {0xA500, 0xA60C}, {0xA610, 0xA61F}, {0xA62A, 0xA66E}, {0xA67F, 0xA69D}, {0xA6A0, 0xA6E5},
    {0xA717, 0xA71F}, {0xA722, 0xA788}, {0xA78B, 0xA801}, {0xA803, 0xA805}, {0xA807, 0xA80A},
    {0xA80C, 0xA822}, {0xA840, 0xA873}, {0xA882, 0xA8B3}, {0xA8F2, 0xA8F7}, {0xA8FB, 0xA8FB},
    {0xA8FD, 0xA8FE}, {0xA90A, 0xA925}, {0xA930, 0xA946}, {0xA960, 0xA97C}, {0xA984, 0xA9B2},
    {0xA9CF, 0xA9CF}, {0xA9E0, 0xA9E4}, {0xA9E6, 0xA9EF}, {0xA9FA, 0xAA28}, {0xAA40, 0xAA42},
    {0xAA44, 0xAA4B}, {0xAA60, 0xAA76}, {0xAA7A, 0xAA7A}, {0xAA7E, 0xAAAF}, {0xAAB1, 0xAAB1},
    {0xAAB5, 0xAAB6}, {0xAAB9, 0xAABD}, {0xAAC0, 0xAAC0}, {0xAAC2, 0xAADD}, {0xAAE0, 0xAAEA},
    {0xAAF2, 0xAAF4}, {0xAB01, 0xAB5A}, {0xAB5C, 0xAB69}, {0xAB70, 0xABE2}, {0xAC00, 0xD7FB},
    {0xF900, 0xFB1D}, {0xFB1F, 0xFB28}, {0xFB2A, 0xFBB1}, {0xFBD3, 0xFD3D}, {0xFD50, 0xFDC7},
    {0xFDF0, 0xFDFB}, {0xFE70, 0xFEFC}, {0xFF21, 0xFF3A}, {0xFF41, 0xFF5A}, {0xFF66, 0xFFDC},
    {0x10000, 0x100FA}, {0x10280, 0x102D0}, {0x10300, 0x1031F}, {0x1032D, 0x10340},
    {0x10342, 0x10349}, {0x10350, 0x10375}, {0x10380, 0x1039D}, {0x103A0, 0x103CF},
    {0x10400, 0x1049D}, {0x104B0, 0x10563}, {0x10570, 0x10855}, {0x10860, 0x10876},
    {0x10880, 0x1089E}, {0x108E0, 0x108F5}, {0x10900, 0x10915}, {0x10920, 0x10939},
    {0x10980, 0x109B7}, {0x109BE, 0x109BF}, {0x10A00, 0x10A00}, {0x10A10, 0x10A35},
    {0x10A60, 0x10A7C}, {0x10A80, 0x10A9C}, {0x10AC0, 0x10AC7}, {0x10AC9, 0x10AE4},
    {0x10B00, 0x10B35}, {0x10B40, 0x10B55}, {0x10B60, 0x10B72}, {0x10B80, 0x10B91},
    {0x10C00, 0x10CF2}, {0x10D00, 0x10D23}, {0x10E80, 0x10EA9}, {0x10EB0, 0x10F1C},
    {0x10F27, 0x10F45}, {0x10F70, 0x10F81}, {0x10FB0, 0x10FC4}, {0x10FE0, 0x10FF6},
    {0x11003, 0x11037}, {0x11071, 0x11072}, {0x11075, 0x11075}, {0x11083, 0x110AF},
    {0x110D0, 0x110E8}, {0x11103, 0x11126}, {0x11144, 0x11144}, {0x11147, 0x11172},
    {0x11176, 0x11176}, {0x11183, 0x111B2}, {0x111C1, 0x111C4}, {0x111DA, 0x111DA},
    {0x111DC, 0x111DC}, {0x11200, 0x1122B}, {0x11280, 0x112A8}, {0x112B0, 0x112DE},
    {0x11305, 0x11339}, {0x1133D, 0x1133D}, {0x11350, 0x11350}, {0x1135D, 0x11361},
    {0x11400, 0x11434}, {0x11447, 0x1144A}, {0x1145F, 0x114AF}, {0x114C4, 0x114C5},
    {0x114C7, 0x114C7}, {0x11580, 0x115AE}, {0x115D8, 0x115DB}, {0x11600, 0x1162F},
    {0x11644, 0x11644}, {0x11680, 0x116AA}, {0x116B8, 0x116B8}, {0x11700, 0x1171A},
    {0x11740, 0x1182B}, {0x118A0, 0x118DF}, {0x118FF, 0x1192F}, {0x1193F, 0x1193F},
    {0x11941, 0x11941}, {0x119A0, 0x119D0}, {0x119E1, 0x119E1}, {0x119E3, 0x119E3},
    {0x11A00, 0x11A00}, {0x11A0B, 0x11A32}, {0x11A3A, 0x11A3A}, {0x11A50, 0x11A50},
    {0x11A5C, 0x11A89}, {0x11A9D, 0x11A9D}, {0x11AB0, 0x11C2E}, {0x11C40, 0x11C40},
    {0x11C72, 0x11C8F}, {0x11D00, 0x11D30}, {0x11D46, 0x11D46}, {0x11D60, 0x11D89},
    {0x11D98, 0x11D98}, {0x11EE0, 0x11EF2}, {0x11FB0, 0x11FB0}, {0x12000, 0x12399},
    {0x12480, 0x12FF0}, {0x13000, 0x1342E}, {0x14400, 0x16A5E}, {0x16A70, 0x16ABE},
    {0x16AD0, 0x16AED}, {0x16B00, 0x16B2F}, {0x16B40, 0x16B43}, {0x16B63, 0x16E7F},
    {0x16F00, 0x16F4A}, {0x16F50, 0x16F50}, {0x16F93, 0x16FE1}, {0x16FE3, 0x16FE3},
    {0x17000, 0x1BC99}, {0x1D400, 0x1D6C0}, {0x1D6C2, 0x1D6DA}, {0x1D6DC, 0x1D6FA},
    {0x1D6FC, 0x1D714}, {0x1D716, 0x1D734}, {0x1D736, 0x1D74E}, {0x1D750, 0x1D76E},
    {0x1D770, 0x1D788}, {0x1D78A, 0x1D7A8}, {0x1D7AA, 0x1D7C2}, {0x1D7C4, 0x1D7CB},
    {0x1DF00, 0x1DF1E}, {0x1E100, 0x1E12C}, {0x1E137, 0x1E13D}, {0x1E14E, 0x1E14E},
    {0x1E290, 0x1E2AD}, {0x1E2C0, 0x1E2EB}, {0x1E7E0, 0x1E8C4}, {0x1E900, 0x1E943},
    {0x1E94B, 0x1E94B}, {0x1EE00, 0x1EEBB}, {0x20000, 0x3134A},
};
static const uint32_t bpe_numbers[][2] = {
    {0xB2, 0xB3}, {0xB9, 0xB9}, {0xBC, 0xBE}, {0x660, 0x669}, {0x6F0, 0x6F9}, {0x7C0, 0x7C9},
    {0x966, 0x96F}, {0x9E6, 0x9EF}, {0x9F4, 0x9F9}, {0xA66, 0xA6F}, {0xAE6, 0xAEF}, {0xB66, 0xB6F},
    {0xB72, 0xB77}, {0xBE6, 0xBF2}, {0xC66, 0xC6F}, {0xC78, 0xC7E}, {0xCE6, 0xCEF}, {0xD58, 0xD5E},
    {0xD66, 0xD78}, {0xDE6, 0xDEF}, {0xE50, 0xE59}, {0xED0, 0xED9}, {0xF20, 0xF33},
    {0x1040, 0x1049}, {0x1090, 0x1099}, {0x1369, 0x137C}, {0x16EE, 0x16F0}, {0x17E0, 0x17F9},
    {0x1810, 0x1819}, {0x1946, 0x194F}, {0x19D0, 0x19DA}, {0x1A80, 0x1A99}, {0x1B50, 0x1B59},
    {0x1BB0, 0x1BB9}, {0x1C40, 0x1C49}, {0x1C50, 0x1C59}, {0x2070, 0x2070}, {0x2074, 0x2079},
    {0x2080, 0x2089}, {0x2150, 0x2182}, {0x2185, 0x2189}, {0x2460, 0x249B}, {0x24EA, 0x24FF},
    {0x2776, 0x2793}, {0x2CFD, 0x2CFD}, {0x3007, 0x3007}, {0x3021, 0x3029}, {0x3038, 0x303A},
    {0x3192, 0x3195}, {0x3220, 0x3229}, {0x3248, 0x324F}, {0x3251, 0x325F}, {0x3280, 0x3289},
    {0x32B1, 0x32BF}, {0xA620, 0xA629}, {0xA6E6, 0xA6EF}, {0xA830, 0xA835}, {0xA8D0, 0xA8D9},
    {0xA900, 0xA909}, {0xA9D0, 0xA9D9}, {0xA9F0, 0xA9F9}, {0xAA50, 0xAA59}, {0xABF0, 0xABF9},
    {0xFF10, 0xFF19}, {0x10107, 0x10133}, {0x10140, 0x10178}, {0x1018A, 0x1018B},
    {0x102E1, 0x102FB}, {0x10320, 0x10323}, {0x10341, 0x10341}, {0x1034A, 0x1034A},
    {0x103D1, 0x103D5}, {0x104A0, 0x104A9}, {0x10858, 0x1085F}, {0x10879, 0x1087F},
    {0x108A7, 0x108AF}, {0x108FB, 0x108FF}, {0x10916, 0x1091B}, {0x109BC, 0x109BD},
    {0x109C0, 0x109FF}, {0x10A40, 0x10A48}, {0x10A7D, 0x10A7E}, {0x10A9D, 0x10A9F},
    {0x10AEB, 0x10AEF}, {0x10B58, 0x10B5F}, {0x10B78, 0x10B7F}, {0x10BA9, 0x10BAF},
    {0x10CFA, 0x10CFF}, {0x10D30, 0x10E7E}, {0x10F1D, 0x10F26}, {0x10F51, 0x10F54},
    {0x10FC5, 0x10FCB}, {0x11052, 0x1106F}, {0x110F0, 0x110F9}, {0x11136, 0x1113F},
    {0x111D0, 0x111D9}, {0x111E1, 0x111F4}, {0x112F0, 0x112F9}, {0x11450, 0x11459},
    {0x114D0, 0x114D9}, {0x11650, 0x11659}, {0x116C0, 0x116C9}, {0x11730, 0x1173B},
    {0x118E0, 0x118F2}, {0x11950, 0x11959}, {0x11C50, 0x11C6C}, {0x11D50, 0x11D59},
    {0x11DA0, 0x11DA9}, {0x11FC0, 0x11FD4}, {0x12400, 0x1246E}, {0x16A60, 0x16A69},
    {0x16AC0, 0x16AC9}, {0x16B50, 0x16B61}, {0x16E80, 0x16E96}, {0x1D2E0, 0x1D2F3},
    {0x1D360, 0x1D378}, {0x1D7CE, 0x1D7FF}, {0x1E140, 0x1E149}, {0x1E2F0, 0x1E2F9},
    {0x1E8C7, 0x1E8CF}, {0x1E950, 0x1E959}, {0x1EC71, 0x1ECAB}, {0x1ECAD, 0x1ECAF},
    {0x1ECB1, 0x1ED2D}, {0x1ED2F, 0x1ED3D}, {0x1F100, 0x1F10C}, {0x1FBF0, 0x1FBF9},
};

#define BPE_N(a) ((int)(sizeof a / sizeof a[0]))

static int bpe_in(const uint32_t (*r)[2], int n, unsigned cp)
{
    int lo = 0, hi = n;
    while (lo < hi) {
        int mid = lo + (hi - lo) / 2;
        if (cp < r[mid][0])
            hi = mid;
        else if (cp > r[mid][1])
            lo = mid + 1;
        else
            return 1;
    }
    return 0;
}

static int bpe_class(unsigned cp)
{
    if (cp < 0x80)
        return (cp | 32) >= 'a' && (cp | 32) <= 'z' ? BPE_LETTER
               : cp >= '0' && cp <= '9'             ? BPE_NUMBER
               : cp == ' ' || (cp >= 9 && cp <= 13) ? BPE_SPACE
                                                    : BPE_OTHER;
    if (cp == 0x85 || cp == 0xA0 || cp == 0x1680 || (cp >= 0x2000 && cp <= 0x200A) ||
        cp == 0x2028 || cp == 0x2029 || cp == 0x202F || cp == 0x205F || cp == 0x3000)
        return BPE_SPACE;
    return bpe_in(bpe_letters, BPE_N(bpe_letters), cp)   ? BPE_LETTER
           : bpe_in(bpe_numbers, BPE_N(bpe_numbers), cp) ? BPE_NUMBER
                                                         : BPE_OTHER;
}

/* ---- the pre-tokenizer's pieces ------------------------------------------ */

/* The code point at s[i] (valid UTF-8, i < n) and its length. */
static unsigned bpe_cp(const unsigned char *s, size_t i, size_t *len)
{
    unsigned c = s[i];
    *len = c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : c >= 0xC0 ? 2 : 1;
    c &= *len > 1 ? 0x7F >> *len : 0x7F;
    for (size_t k = 1; k < *len; k++)
        c = c << 6 | (s[i + k] & 0x3F);
    return c;
}

/* The class of the character at s[i], or -1 at the end. */
static int bpe_class_at(const unsigned char *s, size_t i, size_t n)
{
    size_t len;
    return i < n ? bpe_class(bpe_cp(s, i, &len)) : -1;
}

/* The end of the run of characters of class cls from s[i] (at most max
 * of them); *last: where its last character starts. */
static size_t bpe_span(const unsigned char *s, size_t i, size_t n, int cls, size_t max,
                      size_t *last)
{
    size_t len;
    *last = i;
    for (size_t k = 0; k < max && i < n && bpe_class(bpe_cp(s, i, &len)) == cls; k++)
        *last = i, i += len;
    return i;
}

/* 's|'t|'re|'ve|'m|'ll|'d at s[i] (either case when fold): its length or 0. */
static size_t bpe_contraction(const unsigned char *s, size_t i, size_t n, int fold)
{
    static const char *const ends[] = {"s", "t", "re", "ve", "m", "ll", "d"};
    if (s[i] != '\'')
        return 0;
    if (fold && n - i >= 3 && s[i + 1] == 0xC5 && s[i + 2] == 0xBF)   /* U+017F */
        return 3;
    for (int k = 0; k < BPE_N(ends); k++) {
        size_t m = strlen(ends[k]), j = 0;
        while (j < m && i + 1 + j < n &&
               (s[i + 1 + j] == ends[k][j] || (fold && (s[i + 1 + j] | 32) == ends[k][j])))
            j++;
        if (j == m)
            return 1 + m;
    }
    return 0;
}

/* \s+(?!\S)|\s+ at s[i], a space: the run of spaces, less its last when
 * a non-space follows, unless that leaves none. */
static size_t bpe_spaces(const unsigned char *s, size_t i, size_t n)
{
    size_t last, end = bpe_span(s, i, n, BPE_SPACE, SIZE_MAX, &last);
    return end < n && last > i ? last : end;
}

/* GPT-2: 's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+
 *        |\s+(?!\S)|\s+ */
static size_t bpe_gpt2(const unsigned char *s, size_t i, size_t n)
{
    size_t k = bpe_contraction(s, i, n, 0), last;
    if (k)
        return i + k;
    size_t j = i + (s[i] == ' ' && i + 1 < n);            /* the optional space */
    int cls = bpe_class_at(s, j, n);
    return cls != BPE_SPACE ? bpe_span(s, j, n, cls, SIZE_MAX, &last) : bpe_spaces(s, i, n);
}

/* Qwen2 (digits 1) and Llama 3 (digits 3): (?i:'s|'t|'re|'ve|'m|'ll|'d)
 *   |[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,digits}| ?[^\s\p{L}\p{N}]+[\r\n]*
 *   |\s*[\r\n]+|\s+(?!\S)|\s+ */
static size_t bpe_qwen2(const unsigned char *s, size_t i, size_t n, size_t digits)
{
    size_t k = bpe_contraction(s, i, n, 1), len, last;
    if (k)
        return i + k;
    unsigned cp = bpe_cp(s, i, &len);
    int cls = bpe_class(cp);
    if (cls == BPE_LETTER)
        return bpe_span(s, i, n, BPE_LETTER, SIZE_MAX, &last);
    if (cls != BPE_NUMBER && cp != '\r' && cp != '\n' && bpe_class_at(s, i + len, n) == BPE_LETTER)
        return bpe_span(s, i + len, n, BPE_LETTER, SIZE_MAX, &last);
    if (cls == BPE_NUMBER)
        return bpe_span(s, i, n, BPE_NUMBER, digits, &last);
    size_t j = i + (cp == ' ' && i + 1 < n);             /* the optional space */
    if (bpe_class_at(s, j, n) == BPE_OTHER) {
        j = bpe_span(s, j, n, BPE_OTHER, SIZE_MAX, &last);
        while (j < n && (s[j] == '\r' || s[j] == '\n'))
            j++;
        return j;
    }
    size_t end = bpe_span(s, i, n, BPE_SPACE, SIZE_MAX, &last);  /* \s*[\r\n]+ */
    while (end > i && s[end - 1] != '\r' && s[end - 1] != '\n')
        end--;
    return end > i ? end : bpe_spaces(s, i, n);
}

/* The end of the stretch that starts at s[i] (i < n) as a Digits
 * pre-tokenizer cuts the text: a number character, or a run of them, or
 * the run of other characters. */
static size_t bpe_digits(const rt_tok *t, const unsigned char *s, size_t i, size_t n)
{
    size_t last, len;
    int num = bpe_class(bpe_cp(s, i, &len)) == BPE_NUMBER;
    if (num && t->digits == RT_TOK_DIGITS_EACH)
        return i + len;
    if (num)
        return bpe_span(s, i, n, BPE_NUMBER, SIZE_MAX, &last);
    while (i < n && bpe_class(bpe_cp(s, i, &len)) != BPE_NUMBER)
        i += len;
    return i;
}

/* The end of the piece that starts at s[i] (i < n). */
static size_t bpe_piece(const rt_tok *t, const unsigned char *s, size_t i, size_t n)
{
    return t->split == RT_TOK_SPLIT_GPT2    ? bpe_gpt2(s, i, n)
           : t->split == RT_TOK_SPLIT_QWEN2 ? bpe_qwen2(s, i, n, 1)
                                            : bpe_qwen2(s, i, n, 3);
}

/* ---- merges ------------------------------------------------------------------ */

/* ids[0, n), a piece's tokens, merged (kiln_rt.h): while some adjacent
 * pair is a merge, the one of lowest rank (the leftmost of equals)
 * becomes its token; pair[i] caches ids[i], ids[i + 1]'s merge. */
int rt_tok_merge_ids(const rt_tok *t, int32_t *ids, int n, const rt_tok_merge **pair)
{
    for (int i = 0; i + 1 < n; i++)
        pair[i] = rt_tok_merge_find(t, ids[i], ids[i + 1]);
    for (;;) {
        int at = -1;
        for (int i = 0; i + 1 < n; i++)
            if (pair[i] && (at < 0 || pair[i]->rank < pair[at]->rank))
                at = i;
        if (at < 0)
            return n;
        ids[at] = pair[at]->id;
        memmove(ids + at + 1, ids + at + 2, sizeof *ids * (size_t)(n - at - 2));
        memmove(pair + at + 1, pair + at + 2, sizeof *pair * (size_t)(n - at - 2));
        n--;
        if (at > 0)
            pair[at - 1] = rt_tok_merge_find(t, ids[at - 1], ids[at]);
        if (at + 1 < n)
            pair[at] = rt_tok_merge_find(t, ids[at], ids[at + 1]);
    }
}

/* The tokens of piece w[0, m) appended at ids[*k]; a byte without a
 * token (a GGUF's vocabulary may lack some) refuses the text. */
static int bpe_word(const rt_tok *t, const unsigned char *w, size_t m, int32_t *ids, int *k,
                    const rt_tok_merge **pair, rt_err *e)
{
    int id = t->ignore_merges ? rt_tok_lookup(t, (const char *)w, m, "", 0) : -1;
    if (id >= 0) {
        ids[(*k)++] = id;
        return 0;
    }
    for (size_t i = 0; i < m; i++)
        if ((ids[*k + (int)i] = t->byte_id[w[i]]) < 0)
            return rt_errf(e, RT_EINVAL, "the text's byte 0x%02X has no token", w[i]);
    *k += rt_tok_merge_ids(t, ids + *k, (int)m, pair);
    return 0;
}

/* The added token that is longest among those starting at s[i], as its
 * place in t->added, or -1; *len its length. */
static int bpe_added(const rt_tok *t, const unsigned char *s, size_t i, size_t n, size_t *len)
{
    int best = -1;
    *len = 0;
    for (int a = 0; a < t->nadded; a++) {
        int id = t->added[a];
        size_t m = t->len[id];
        if (m > *len && m <= n - i && !memcmp(s + i, t->bytes + t->off[id], m))
            best = a, *len = m;
    }
    return best;
}

/* Whether the character at s[c] is a space that an added token's strip
 * takes: White_Space, or with a GGUF (as llama.cpp) an ASCII one. */
static int bpe_strip_space(const rt_tok *t, const unsigned char *s, size_t c)
{
    size_t len;
    if (t->format == RT_TOK_GGUF)
        return s[c] == ' ' || (s[c] >= 9 && s[c] <= 13);
    return bpe_class(bpe_cp(s, c, &len)) == BPE_SPACE;
}

/* The end of the spaces from s[i] (an rstrip token's). */
static size_t bpe_skip_spaces(const rt_tok *t, const unsigned char *s, size_t i, size_t n)
{
    size_t len;
    while (i < n && bpe_strip_space(t, s, i))
        bpe_cp(s, i, &len), i += len;
    return i;
}

/* s[i, end) less the spaces at its end (an lstrip token's). */
static size_t bpe_trim_spaces(const rt_tok *t, const unsigned char *s, size_t i, size_t end)
{
    while (end > i) {
        size_t c = end - 1;
        while (c > i && (s[c] & 0xC0) == 0x80)
            c--;
        if (!bpe_strip_space(t, s, c))
            break;
        end = c;
    }
    return end;
}

int rt_tok_encode_bpe(const rt_tok *t, const char *text, int add_bos, int32_t *ids, int *n,
                      rt_err *e)
{
    const unsigned char *s = (const unsigned char *)text;
    size_t len = strlen(text), bad = rt_utf8_bad(s, len), m;
    if (bad < len)
        return rt_errf(e, RT_EINVAL, "the text is not valid UTF-8 at byte %zu", bad);
    size_t room = t->space != RT_TOK_BYTES ? 3 * len + 4 : len + 1;
    const rt_tok_merge **pair = malloc(sizeof *pair * room);
    char *norm = t->space != RT_TOK_BYTES ? malloc(room) : NULL;
    if (!pair || (t->space != RT_TOK_BYTES && !norm)) {
        free(pair);
        return rt_errf(e, RT_EINTERNAL, "out of memory encoding the text");
    }
    int k = 0, rc = 0;
    if (add_bos && t->bos >= 0)
        ids[k++] = t->bos;
    for (size_t i = 0; !rc && i < len;) {
        int a = bpe_added(t, s, i, len, &m);
        if (a >= 0) {
            ids[k++] = t->added[a];
            i += m;
            if (t->strip[a] & RT_TOK_RSTRIP)
                i = bpe_skip_spaces(t, s, i, len);
            continue;
        }
        size_t end = i + 1;                 /* the text up to the next added token */
        while (end < len && (a = bpe_added(t, s, end, len, &m)) < 0)
            end++;
        size_t stop =
            end < len && (t->strip[a] & RT_TOK_LSTRIP) ? bpe_trim_spaces(t, s, i, end) : end;
        if (t->space != RT_TOK_BYTES)
            rc = rt_tok_sp_encode(t, text + i, stop - i, i == 0, ids, &k, norm, pair, e);
        for (size_t a0 = i, a1; !rc && t->space == RT_TOK_BYTES && a0 < stop; a0 = a1) {
            a1 = t->digits ? bpe_digits(t, s, a0, stop) : stop;
            for (size_t j = a0, next; !rc && j < a1; j = next) {
                next = bpe_piece(t, s, j, a1);
                rc = bpe_word(t, s + j, next - j, ids, &k, pair, e);
            }
        }
        i = end;
    }
    free(pair);
    free(norm);
    *n = k;
    return rc;
}
