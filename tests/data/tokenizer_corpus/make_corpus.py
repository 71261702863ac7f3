#!/usr/bin/env python3
"""Writes the tokenizer golden corpus (*.txt beside this script), deterministically.

All text is generated here from small hand-written phrase lists (no copied prose). The
files are committed; rerun this only to change the corpus, then rerun the golden test.
U+FEFF and U+0085 are left out on purpose: the JS reference tokenizer treats them as
whitespace differently from HF tokenizers (see tests/unit/tokenizer_test.cpp).
"""
import os
import random

HERE = os.path.dirname(os.path.abspath(__file__))
rng = random.Random(20240611)


def pick(xs):
    return xs[rng.randrange(len(xs))]


def write(name, text):
    assert '\ufeff' not in text and '\u0085' not in text
    with open(os.path.join(HERE, name), 'w', encoding='utf-8', newline='') as f:
        f.write(text)
    print(f'{name}: {len(text.encode("utf-8"))} bytes')


# ---- English prose ---------------------------------------------------------------
SUBJ = ['The engineer', 'A small robot', 'Our team', 'My neighbour', 'The old lighthouse keeper',
        'Every student', 'She', 'He', 'They', 'The committee', 'A curious cat', 'Nobody',
        'The river', 'This function', 'The scheduler', "The city's mayor", 'I', 'We', 'You']
VERB = ['quietly rebuilt', 'measured', 'forgot about', 'painted', 'argued over', 'rescheduled',
        'carefully tested', 'shipped', 'photographed', 'translated', 'refactored', 'ignored',
        'celebrated', 'documented', 'borrowed', 'returned', 'cooked', 'counted']
OBJ = ['the broken clock', 'a pile of unread letters', 'three hundred lines of code',
       'the bridge near the station', 'an unusually long spreadsheet', 'the garden fence',
       'every red button', 'a map of the northern hills', 'the evening train timetable',
       'twelve jars of plum jam', 'the memory allocator', 'a sketch of the harbour']
TAIL = ['before sunrise', 'without telling anyone', 'in less than an hour', 'for the third time',
        'while it rained', 'after a long lunch', 'just in case', 'on Tuesday, 4 March',
        'at 7:45 p.m.', 'with 99.5% accuracy', 'by accident', '(again)', '-- of course --']
CONTR = ["don't", "can't", "won't", "it's", "they're", "we've", "I'm", "you'll", "she'd",
         "DON'T", "IT'S", "We'Re", "he'll", "wouldn't", "o'clock", "rock 'n' roll", "y'all",
         "the '90s", "'quoted'", "\u2018curly\u2019", "\u201cdouble\u201d", "dog's", "JAMES'S"]
EXTRA = ['e.g.', 'i.e.', 'etc.', 'Dr. Smith', 'U.S.A.', 'https://example.com/a/b?c=1&d=2#frag',
         'user.name+tag@example.org', '#hashtag', '@mention', '$19.99', '\u00a342', '\u20ac7,50',
         '3\u00d74=12', 'x\u00b2 + y\u00b2', '50\u00b0C', '\u2014', '\u2026', '\u00a9 2024', 'C++',
         'C#', 'Node.js', 'snake_case_name', 'camelCaseName', 'kebab-case-name', 'ALLCAPS',
         'MiXeD', 'naïve', 'café', 'résumé', 'coöperate', 'façade', 'jalapeño', 'Zürich']


def english_sentence():
    s = f'{pick(SUBJ)} {pick(VERB)} {pick(OBJ)} {pick(TAIL)}'
    r = rng.random()
    if r < 0.3:
        s += f', and {pick(CONTR)} {pick(["surprising", "fine", "odd", "a relief"])}'
    elif r < 0.5:
        s += f' ({pick(EXTRA)})'
    elif r < 0.6:
        s = f'"{s}," said {pick(["Ana", "Bo", "Chen", "Dmitri", "Eve"])}'
    return s + pick(['.', '.', '.', '!', '?', '...', ';', ':'])


def english(target):
    out = []
    size = 0
    while size < target:
        para = ' '.join(english_sentence() for _ in range(rng.randint(2, 7)))
        if rng.random() < 0.1:
            para = para.upper()
        if rng.random() < 0.15:
            para = f'{rng.randint(1, 20)}. ' + para
        out.append(para)
        size += len(para) + 2
    return '\n\n'.join(out) + '\n'


# ---- Source code -----------------------------------------------------------------
NAMES = ['buffer', 'count', 'index', 'result', 'node', 'value', 'key', 'total', 'page', 'token',
         'max_len', 'numHeads', 'kv_cache', 'tmp', 'x', 'y', 'i', 'j', 'userId', 'scale']
TYPES = ['int', 'float', 'double', 'size_t', 'int32_t', 'std::string', 'bool', 'uint8_t']


def cpp_func():
    n = pick(NAMES)
    t = pick(TYPES)
    a, b = pick(NAMES), pick(NAMES)
    body = [
        f'// {pick(VERB)} {pick(OBJ)}; see issue #{rng.randint(1, 9999)}',
        f'{t} {n}_{rng.randint(0, 99)}({t} {a}, const std::vector<{t}>& {b}s) {{',
        f'  if ({a} <= 0 || {b}s.empty()) return {t}{{}};',
        f'  {t} acc = {rng.randint(0, 1000)};',
        f'  for (size_t k = 0; k < {b}s.size(); ++k) {{',
        f'    acc += {b}s[k] * {a} >> {rng.randint(1, 7)};  /* shift */',
        '    if ((acc & 0xFF) == 0x7F) { acc ^= ~0u; }',
        '  }',
        f'  std::printf("%s: %d\\n", "{n}", static_cast<int>(acc));',
        '  return acc;',
        '}',
    ]
    return '\n'.join(body)


def py_func():
    n = pick(NAMES)
    a, b = pick(NAMES), pick(NAMES)
    body = [
        f'def {n}_{rng.randint(0, 99)}({a}, {b}=None, *args, **kwargs):',
        f'    """{pick(SUBJ)} {pick(VERB)} {pick(OBJ)}."""',
        f'    if {b} is None:',
        f'        {b} = [{", ".join(str(rng.randint(0, 999)) for _ in range(rng.randint(1, 6)))}]',
        f'    out = {{k: v ** 2 for k, v in enumerate({b}) if v % {rng.randint(2, 9)} != 0}}',
        "    name = f'{" + a + "!r:>10}'  # aligned",
        '    return out, name',
    ]
    return '\n'.join(body)


def js_func():
    n = pick(NAMES)
    body = [
        f'export async function {n}{rng.randint(0, 99)}(opts = {{}}) {{',
        f'\tconst {{ {pick(NAMES)}, {pick(NAMES)} = {rng.randint(0, 50)} }} = opts;',
        f'\tconst res = await fetch(`/api/v1/{n}?limit=${{{rng.randint(1, 100)}}}`);',
        '\tif (!res.ok) throw new Error(`HTTP ${res.status}`);',
        '\treturn (await res.json()).items?.map((it) => it.id) ?? [];',
        '}',
    ]
    return '\n'.join(body)


def rust_func():
    n = pick(NAMES)
    body = [
        '#[inline]',
        f"pub fn {n}<'a>(xs: &'a [u32], k: usize) -> Option<&'a u32> {{",
        f'    xs.iter().filter(|&&x| x % {rng.randint(2, 9)} == 0).nth(k)',
        '}',
    ]
    return '\n'.join(body)


def json_blob():
    items = ', '.join(f'{{"id": {rng.randint(0, 99999)}, "name": "{pick(NAMES)}", '
                      f'"ok": {pick(["true", "false", "null"])}, "w": {rng.random():.6f}}}'
                      for _ in range(rng.randint(1, 4)))
    return f'{{"items": [{items}], "next": "{pick(EXTRA)}"}}'


def shell_line():
    return pick([
        'for f in *.txt; do wc -c "$f"; done | sort -n | tail -3',
        'cmake -S . -B build -G Ninja && cmake --build build -j2 2>&1 | grep -E "error|warn"',
        "awk -F'\\t' '{ s += $3 } END { print s / NR }' data.tsv",
        'echo "$HOME" && ls -la ~/.config 2>/dev/null || true',
        'git log --oneline -n 20 -- src/ | cut -c1-80',
    ])


def html_md():
    return pick([
        '<div class="card"><h2>Title &amp; more</h2><p>Text&nbsp;here</p></div>',
        '## Heading\n\n- item one\n- item **two**\n  - nested `code`\n\n> quote\n',
        '| col a | col b |\n|------:|:------|\n|   1   |   2   |',
        '<!-- comment --><script>if (a < b && c > d) { x = "<|not a token|>"; }</script>',
        '```python\nprint("hi")\n```',
    ])


def code(target):
    gens = [cpp_func, py_func, js_func, rust_func, json_blob, shell_line, html_md]
    out = []
    size = 0
    while size < target:
        block = pick(gens)()
        out.append(block)
        size += len(block) + 2
    return '\n\n'.join(out) + '\n'


# ---- CJK ------------------------------------------------------------------------
ZH = ['今天天气很好，我们去公园散步吧。', '这个函数的时间复杂度是多少？', '机器学习模型需要大量的数据。',
      '他在图书馆里看了一下午的书。', '请把文件保存到桌面上。', '我们的服务器每秒处理一万个请求。',
      '中华人民共和国成立于1949年。', '她说：“明天见！”', '价格是￥128.50元。', '《红楼梦》是一部长篇小说。',
      '繁體中文與简体中文並存。', '数据库连接失败，请稍后重试。', '龍、鳳、麒麟都是傳說中的動物。']
JA = ['今日はいい天気ですね。', 'このプログラムはメモリを使いすぎます。', '東京駅で友達に会いました。',
      'すみません、トイレはどこですか？', 'カタカナとひらがなと漢字を混ぜて書きます。',
      'ﾊﾝｶｸｶﾀｶﾅもあります。', 'コンピューター・サイエンスを勉強しています。', 'ラーメンを食べたい！',
      '「日本語」の文章には句読点が、あります。', '全角の英数字：ＡＢＣ１２３ａｂｃ']
KO = ['안녕하세요, 만나서 반갑습니다.', '오늘 회의는 오후 세 시에 시작합니다.', '한국어는 한글로 씁니다.',
      '이 코드는 버그가 있어요.', '서울의 지하철은 아주 편리합니다.', '감사합니다! 좋은 하루 되세요.']


def cjk(target):
    out = []
    size = 0
    while size < target:
        lang = rng.random()
        if lang < 0.45:
            line = ''.join(pick(ZH) for _ in range(rng.randint(1, 5)))
        elif lang < 0.8:
            line = ''.join(pick(JA) for _ in range(rng.randint(1, 4)))
        else:
            line = ' '.join(pick(KO) for _ in range(rng.randint(1, 4)))
        if rng.random() < 0.25:
            line += f' (see {pick(NAMES)}_{rng.randint(0, 99)}.py, line {rng.randint(1, 500)})'
        if rng.random() < 0.1:  # Korean in NFD (conjoining jamo): NFC recomposes it
            import unicodedata
            line = unicodedata.normalize('NFD', pick(KO)) + ' ' + line
        out.append(line)
        size += len(line.encode('utf-8')) + 1
    return '\n'.join(out) + '\n'


# ---- Cyrillic, Greek, Arabic, Hebrew, Indic, Thai --------------------------------
RU = ['Привет, как дела?', 'Сегодня мы выпустили новую версию программы.',
      'Москва — столица России.',
      'Ёжик в тумане искал лошадку.', 'Съешь же ещё этих мягких французских булок, да выпей чаю.',
      'Функция возвращает ОШИБКУ при пустом вводе.']
UK = ['Добрий день! Як справи?', 'Їжачок ґав і їв яблуко.', 'Київ — столиця України.']
EL = ['Καλημέρα σας, τι κάνετε;', 'Η Αθήνα είναι η πρωτεύουσα της Ελλάδας.',
      'ΑΛΦΑ, βήτα, γάμμα, δέλτα.']
AR = ['مرحبا بكم في المدينة.', 'هذا البرنامج يعمل بسرعة كبيرة.', 'الْعَرَبِيَّةُ لُغَةٌ جَمِيلَةٌ.',
      'عدد السكان ١٢٣٤٥٦٧ نسمة.', 'هل تتكلم العربية؟', 'قال: «سأعود غداً».']
HE = ['שלום עולם!', 'הַסֵּפֶר נִמְצָא עַל הַשֻּׁלְחָן.', 'זה מבחן של טקסט מימין לשמאל.']
HI = ['नमस्ते, आप कैसे हैं?', 'भारत की राजधानी नई दिल्ली है।', 'यह प्रोग्राम १२३ पंक्तियों का है।']
TH = ['สวัสดีครับ ยินดีที่ได้รู้จัก', 'ภาษาไทยไม่มีช่องว่างระหว่างคำ', 'วันนี้อากาศร้อนมาก']
VI = ['Tiếng Việt có nhiều dấu thanh.', 'Hà Nội là thủ đô của Việt Nam.',
      'Người ta nói rằng: “Đẹp quá!”']


def world(target):
    groups = [RU, UK, EL, AR, HE, HI, TH, VI]
    out = []
    size = 0
    while size < target:
        g = pick(groups)
        line = ' '.join(pick(g) for _ in range(rng.randint(1, 4)))
        r = rng.random()
        if r < 0.2:
            line = f'{line} / {pick(CONTR)} {pick(OBJ)}'
        elif r < 0.3:
            line = f'{rng.randint(0, 10**6)} {line} {rng.randint(0, 10**6)}'
        out.append(line)
        size += len(line.encode('utf-8')) + 1
    return '\n'.join(out) + '\n'


# ---- Emoji ----------------------------------------------------------------------
EMOJI = ['😀', '😂', '🥲', '❤️', '❤', '👍', '🙏', '🔥', '✨', '🎉', '🚀', '🐍', '🦀', '☕', '⚡',
         '✔️', '✅', '❌', '⭐', '🌍', '🍕', '🫠', '🫸', '🧑‍💻', '👩‍🔬', '👨‍👩‍👧‍👦', '👩‍❤️‍👨',
         '🏳️‍🌈', '🏴‍☠️', '🐻‍❄️', '😶‍🌫️', '❤️‍🔥', '👁️‍🗨️', '🇯🇵', '🇺🇸', '🇩🇪', '🇧🇷', '🇺🇦',
         '1️⃣', '#️⃣', '*️⃣', '©️', '™️', '🏴󠁧󠁢󠁳󠁣󠁴󠁿', '🏴󠁧󠁢󠁷󠁬󠁳󠁿']
TONES = ['\U0001F3FB', '\U0001F3FC', '\U0001F3FD', '\U0001F3FE', '\U0001F3FF']
TONEABLE = ['👍', '👋', '🙌', '👏', '🤝', '✌', '🧑', '👩', '👨', '🏃', '🧘']


def one_emoji():
    r = rng.random()
    if r < 0.3:
        return pick(TONEABLE) + pick(TONES)
    if r < 0.4:  # toned ZWJ sequences
        return pick(['🧑', '👩', '👨']) + pick(TONES) + '\u200d' + pick(['💻', '🔬', '🚀', '🍳', '🎨'])
    if r < 0.45:
        return '👩' + pick(TONES) + '\u200d🤝\u200d👨' + pick(TONES)
    return pick(EMOJI)


def emoji(target):
    out = []
    size = 0
    while size < target:
        parts = []
        for _ in range(rng.randint(1, 8)):
            r = rng.random()
            if r < 0.4:
                parts.append(''.join(one_emoji() for _ in range(rng.randint(1, 4))))
            elif r < 0.7:
                parts.append(pick(['great job', 'ship it', 'so tired', 'lol', 'ok', 'wow',
                                   'see you', 'thanks', 'nice', 'hmm']))
            elif r < 0.85:
                parts.append(pick(ZH + JA) + one_emoji())
            else:
                parts.append(one_emoji() + pick(['!', '!!', '?', '...', ':)', ':-(']))
        line = ' '.join(parts)
        out.append(line)
        size += len(line.encode('utf-8')) + 1
    return '\n'.join(out) + '\n'


# ---- Combining marks, NFC and NFD forms ------------------------------------------
def combining(target):
    import unicodedata
    words = ['café', 'naïve', 'résumé', 'Ångström', 'piñata', 'Øresund', 'ærø', 'Dvořák',
             'Łódź', 'Škoda', 'Ελληνικά', 'Tiếng Việt', 'Nguyễn', 'người', 'phở', 'ệ', 'ǖ',
             'Ṩ', 'ḉ', 'Ǻ', 'ﬁ', 'Å', 'Ω', 'K', '한국어', '가나다', '㈜', 'ａｂｃ', 'x\u0338',
             'q\u0307\u0323', 'a\u0301\u0300\u0302', 'Zalgo z\u0335\u0353a\u0336\u031bl\u0327',
             'ś\u0301', '\u0301alone', 'e\u0301\u0301', 'ﾀﾞ', 'が', 'か\u3099', 'ᄀ\u1161\u11a8',
             'ṩ\u0323', 'Å', 'ǅ', 'İ', 'ẞ', 'ŉ']
    out = []
    size = 0
    while size < target:
        ws = [pick(words) for _ in range(rng.randint(3, 10))]
        form = pick(['NFC', 'NFD', 'NFKD', 'raw', 'mixed'])
        if form == 'mixed':
            ws = [unicodedata.normalize(pick(['NFC', 'NFD']), w) for w in ws]
        elif form != 'raw':
            ws = [unicodedata.normalize(form, w) for w in ws]
        line = ' '.join(ws) + pick(['', '.', ',', ' !', '\u0301', ' \u0308'])
        out.append(line)
        size += len(line.encode('utf-8')) + 1
    return '\n'.join(out) + '\n'


# ---- Whitespace runs and digits -------------------------------------------------
def whitespace_digits(target):
    out = []
    size = 0
    while size < target:
        r = rng.random()
        if r < 0.2:
            s = ' ' * rng.randint(1, 120) + pick(NAMES) + ' ' * rng.randint(0, 40)
        elif r < 0.3:
            s = '\t' * rng.randint(1, 12) + pick(NAMES) + '\t' * rng.randint(0, 3) + ' '
        elif r < 0.4:
            s = pick(NAMES) + '\r\n' * rng.randint(1, 4) + pick(NAMES) + '\r' + pick(NAMES)
        elif r < 0.5:
            s = ''.join(pick([' ', '\t', '\r\n', '\n', '  ', '\u00a0', '\u3000', '\u2003', '\f',
                              '\v', '\u2028', '\u180e']) for _ in range(rng.randint(1, 30)))
            s = 'x' + s + 'y'
        elif r < 0.65:
            s = ''.join(str(rng.randint(0, 9)) for _ in range(rng.randint(10, 1500)))
        elif r < 0.75:
            s = pick(['3.14159265358979323846', '1,234,567.89', '+1 (555) 010-9999',
                      '0x7FFFFFFF', '0b1010_1010', '1e-9', '2024-06-11T08:30:00Z', '10^100',
                      '٠١٢٣٤٥٦٧٨٩', '१२३', '①②③', '⅓ + ⅔ = 1', 'v1.2.3-rc.4+build.5'])
            s = f'{s} {rng.randint(0, 10**rng.randint(1, 30))}'
        elif r < 0.9:
            s = english_sentence() + ' ' * rng.randint(1, 8)
        else:
            s = ''
        out.append(s)
        size += len(s) + 1
    return '\n'.join(out) + '\n\n\n   \n'


# ---- Added/special tokens inside text -------------------------------------------
SPECIALS = ['<|im_start|>', '<|im_end|>', '<|endoftext|>', '<think>', '</think>', '<tool_call>',
            '</tool_call>', '<tool_response>', '</tool_response>', '<|fim_prefix|>',
            '<|fim_middle|>', '<|fim_suffix|>', '<|vision_start|>', '<|image_pad|>',
            '<|vision_end|>', '<|box_start|>', '<|repo_name|>', '<|file_sep|>']
NEAR = ['<|im_start', 'im_end|>', '<|', '|>', '<|im_end |>', '< |im_end|>', '<|IM_END|>',
        '<think >', '<thinking>', '</think', '<|endoftext|', '<<|', '|>>', '<|endoftext||>']


def specials(target):
    out = []
    size = 0
    while size < target:
        r = rng.random()
        if r < 0.4:
            role = pick(['system', 'user', 'assistant', 'tool'])
            body = english_sentence()
            if role == 'assistant' and rng.random() < 0.5:
                body = f'<think>\n{english_sentence()}\n</think>\n\n{body}'
            if role == 'assistant' and rng.random() < 0.3:
                body += f'\n<tool_call>\n{json_blob()}\n</tool_call>'
            s = f'<|im_start|>{role}\n{body}<|im_end|>\n'
        elif r < 0.6:
            s = pick(NAMES) + pick(SPECIALS) + pick(NAMES) + pick(['', ' ', '\n']) + pick(SPECIALS)
        elif r < 0.75:
            s = ' '.join(pick(NEAR + SPECIALS) for _ in range(rng.randint(1, 6)))
        elif r < 0.85:
            s = ''.join(pick(SPECIALS) for _ in range(rng.randint(2, 5)))
        else:
            s = f'{pick(ZH)}{pick(SPECIALS)}{one_emoji()}{pick(SPECIALS)} {pick(RU)}'
        out.append(s)
        size += len(s.encode('utf-8')) + 1
    return '\n'.join(out) + '<|endoftext|>'


if __name__ == '__main__':
    write('english.txt', english(60000))
    write('code.txt', code(50000))
    write('cjk.txt', cjk(35000))
    write('world.txt', world(35000))
    write('emoji.txt', emoji(20000))
    write('combining.txt', combining(20000))
    write('whitespace_digits.txt', whitespace_digits(30000))
    write('special_tokens.txt', specials(20000))
