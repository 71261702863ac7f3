#include "model/chat_templates.h"

namespace cpinfer {

const std::string& qwen2_chat_template() {
  static const std::string t =
      "{%- if messages[0]['role'] == 'system' %}\n"
      "    {{- '<|im_start|>system\\n' + messages[0]['content'] + '<|im_end|>\\n' }}\n"
      "{%- else %}\n"
      "    {{- '<|im_start|>system\\nYou are Qwen, created by Alibaba Cloud. You are a helpful "
      "assistant.<|im_end|>\\n' }}\n"
      "{%- endif %}\n"
      "{%- for message in messages %}\n"
      "    {%- if not (message['role'] == 'system' and loop.first) %}\n"
      "        {{- '<|im_start|>' + message['role'] + '\\n' + message['content'] + "
      "'<|im_end|>\\n' }}\n"
      "    {%- endif %}\n"
      "{%- endfor %}\n"
      "{%- if add_generation_prompt %}\n"
      "    {{- '<|im_start|>assistant\\n' }}\n"
      "{%- endif %}\n";
  return t;
}

const std::string& llama3_chat_template() {
  static const std::string t =
      "{{- bos_token }}\n"
      "{%- for message in messages %}\n"
      "    {{- '<|start_header_id|>' + message['role'] + '<|end_header_id|>\\n\\n' + "
      "message['content'] | trim + '<|eot_id|>' }}\n"
      "{%- endfor %}\n"
      "{%- if add_generation_prompt %}\n"
      "    {{- '<|start_header_id|>assistant<|end_header_id|>\\n\\n' }}\n"
      "{%- endif %}\n";
  return t;
}

}  // namespace cpinfer
