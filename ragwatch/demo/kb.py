# ruff: noqa: E501 - Chinese documents read better as one line each than split mid-sentence
"""The demo's knowledge base: a small bilingual (English / 简体中文) internal policy handbook.

Written for the demo, not copied from anywhere. Kept as Python literals rather than a data file so it
ships with the package without any package-data configuration. Each topic has three short documents per
language that share the topic's vocabulary, so a healthy retriever returns three on-topic chunks (what
Context Precision@3 rewards) and a broken one visibly does not. Documents carry numbers on purpose: an
invented number is the clearest hallucination the offline judge can catch.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

__all__ = ["CHUNKS", "DOCUMENTS", "QUESTIONS", "Chunk", "Document", "Question", "chunk_sections"]


@dataclass(frozen=True, slots=True)
class Document:
    id: str
    lang: str
    topic: str
    text: str


@dataclass(frozen=True, slots=True)
class Chunk:
    """What the index holds: a window of consecutive sentences of one handbook section."""

    id: str
    lang: str
    topic: str
    text: str


@dataclass(frozen=True, slots=True)
class Question:
    text: str
    lang: str
    topic: str


_EN = {
    "expenses": {
        "exp-meals-en": "Meal expenses on business days are reimbursed up to 150 yuan per person per day. "
        "Alcohol is never reimbursed as a meal expense. Client dinners need the name of the client on the "
        "expense report.",
        "exp-claims-en": "Expense reports must be submitted within 30 days of the expense date. Every expense "
        "report above 600 yuan needs manager approval before finance pays it. Finance pays approved expense "
        "reports within 10 working days.",
        "exp-receipts-en": "An official invoice (fapiao) or receipt is required for every expense above 50 "
        "yuan. Lost receipts can be replaced by a signed declaration at most twice per year. Expense receipts "
        "must show the company's tax number.",
    },
    "leave": {
        "leave-annual-en": "Full-time employees get 10 days of paid annual leave per year, rising to 15 days "
        "after 5 years of service. Unused annual leave can be carried over until March 31 of the next year.",
        "leave-sick-en": "Sick leave of up to 3 days per year needs no medical certificate. Longer sick leave "
        "needs a certificate from a hospital. Sick leave is paid at 80 percent of the base salary after the "
        "first 5 days.",
        "leave-request-en": "Leave requests are submitted in the HR portal at least 3 working days in advance. "
        "Requests for more than 5 consecutive days of leave need approval from the department head.",
    },
    "it": {
        "it-laptop-en": "Every new employee receives a company laptop on the first working day. Laptops are "
        "replaced every 4 years. A lost or stolen laptop must be reported to the IT helpdesk within 24 hours.",
        "it-password-en": "Passwords must be at least 12 characters long and are changed every 90 days. The "
        "IT helpdesk never asks for your password. Multi-factor authentication is required for email and VPN.",
        "it-software-en": "Software may only be installed from the company software portal. Requests for "
        "other software go to the IT helpdesk and are answered within 2 working days.",
    },
    "security": {
        "sec-badge-en": "Employees must wear their security badge visibly inside the office. Visitors are "
        "registered at reception and escorted at all times. A lost badge is reported to security within 1 day.",
        "sec-data-en": "Customer data is classified as confidential. Confidential data may not be copied to "
        "USB drives or personal cloud storage. Security incidents are reported to the security team within "
        "2 hours.",
        "sec-phishing-en": "Suspicious emails are reported with the phishing button in the mail client. The "
        "security team runs a phishing simulation every quarter. Employees who click a simulated phishing link "
        "take a 30 minute security training.",
    },
    "travel": {
        "travel-hotel-en": "Hotel costs on business travel are reimbursed up to 500 yuan per night in tier-one "
        "cities and 350 yuan per night elsewhere. Hotels are booked through the company travel platform.",
        "travel-flight-en": "Business travel flights are booked in economy class. Flights longer than 6 hours "
        "may be booked in premium economy. Flights for business travel are booked at least 7 days in advance.",
        "travel-approval-en": "Every business trip needs a travel request approved by the manager before "
        "booking. International business travel also needs approval from the department head 14 days before "
        "departure.",
    },
}

_ZH = {
    "expenses": {
        "exp-meals-zh": "出差期间的餐费每人每天最多报销150元。酒水不属于餐费报销范围。宴请客户需要在报销单上注明客户名称。",
        "exp-claims-zh": "报销单必须在费用发生后30天内提交。金额超过600元的报销单需要经理审批后财务才付款。财务在10个工作日内支付已审批的报销单。",
        "exp-receipts-zh": "超过50元的每笔费用都必须提供发票或收据。遗失发票每年最多两次可以用签字声明代替。报销发票必须写明公司税号。",
    },
    "leave": {
        "leave-annual-zh": "全职员工每年享有10天带薪年假，工作满5年后增加到15天。未休完的年假可以保留到次年3月31日。",
        "leave-sick-zh": "每年3天以内的病假不需要医院证明。超过3天的病假需要提供医院开具的证明。病假超过5天后按基本工资的80%发放。",
        "leave-request-zh": "请假需要至少提前3个工作日在人事系统中提交申请。连续请假超过5天需要部门负责人审批。",
    },
    "it": {
        "it-laptop-zh": "新员工在入职第一天领取公司笔记本电脑。笔记本电脑每4年更换一次。笔记本电脑丢失或被盗必须在24小时内报告IT服务台。",
        "it-password-zh": "密码长度至少12位，每90天更换一次。IT服务台绝不会索要你的密码。邮箱和VPN必须开启多因素认证。",
        "it-software-zh": "软件只能从公司软件门户安装。安装其他软件需要向IT服务台申请，IT服务台在2个工作日内答复。",
    },
    "security": {
        "sec-badge-zh": "员工在办公室内必须佩戴安全工牌。访客需要在前台登记并全程陪同。工牌丢失需要在1天内报告安全部门。",
        "sec-data-zh": "客户数据属于机密数据。机密数据不得复制到U盘或个人云盘。安全事件必须在2小时内报告安全团队。",
        "sec-phishing-zh": "可疑邮件通过邮件客户端的钓鱼举报按钮报告。安全团队每季度进行一次钓鱼邮件演练。点击演练钓鱼链接的员工需要参加30分钟的安全培训。",
    },
    "travel": {
        "travel-hotel-zh": "出差住宿费在一线城市每晚最多报销500元，其他城市每晚最多报销350元。出差酒店通过公司差旅平台预订。",
        "travel-flight-zh": "出差机票一律预订经济舱。飞行时间超过6小时的航班可以预订超级经济舱。出差机票需要至少提前7天预订。",
        "travel-approval-zh": "每次出差都需要在预订前提交出差申请并由经理审批。出国出差还需要在出发前14天获得部门负责人审批。",
    },
}

DOCUMENTS: tuple[Document, ...] = tuple(
    Document(doc_id, lang, topic, text)
    for lang, table in (("en", _EN), ("zh", _ZH))
    for topic, docs in table.items()
    for doc_id, text in docs.items()
)

_QUESTIONS = {
    "en": {
        "expenses": [
            "Up to how much are meal expenses reimbursed per person per day?",
            "Are alcohol expenses reimbursed as meals?",
            "Within how many days must expense reports be submitted?",
            "Which expense reports need manager approval?",
            "When does finance pay approved expense reports?",
            "Is a receipt required for every expense?",
            "What if I lost an expense receipt?",
        ],
        "leave": [
            "How many days of paid annual leave do employees get?",
            "Can unused annual leave be carried over?",
            "When does sick leave need a medical certificate?",
            "How is long sick leave paid?",
            "How far in advance must leave requests be submitted?",
            "Who approves leave of more than 5 days?",
        ],
        "it": [
            "When do new employees receive a company laptop?",
            "What should I do if my laptop is stolen?",
            "How long must passwords be and how often are they changed?",
            "Is multi-factor authentication required for VPN?",
            "How do I install software that is not in the software portal?",
            "How often are company laptops replaced?",
        ],
        "security": [
            "Do employees have to wear their security badge in the office?",
            "Are visitors registered at reception and escorted?",
            "Can confidential customer data be copied to a USB drive?",
            "How quickly must security incidents be reported?",
            "How do I report a suspicious phishing email?",
            "What happens if I click a simulated phishing link?",
        ],
        "travel": [
            "What is the hotel limit per night on business travel?",
            "Which class are business travel flights booked in?",
            "How far in advance are business travel flights booked?",
            "Who approves a business trip before booking?",
            "What approval does international business travel need?",
            "How are hotels for business travel booked?",
        ],
    },
    "zh": {
        "expenses": [
            "出差期间的餐费每人每天最多报销多少元？",
            "酒水属于餐费报销范围吗？",
            "报销单需要在多少天内提交？",
            "多少金额的报销单需要经理审批？",
            "财务多久支付已审批的报销单？",
            "哪些费用必须提供发票？",
            "遗失发票可以用签字声明代替吗？",
        ],
        "leave": [
            "全职员工每年享有多少天带薪年假？",
            "未休完的年假可以保留吗？",
            "病假什么时候需要医院证明？",
            "病假超过5天工资怎么发放？",
            "请假需要提前几天提交申请？",
            "连续请假超过5天需要谁审批？",
        ],
        "it": [
            "新员工在哪天领取公司笔记本电脑？",
            "密码长度至少多少位，多少天更换一次？",
            "VPN需要开启多因素认证吗？",
            "公司笔记本电脑每几年更换一次？",
        ],
        "security": [
            "在办公室内必须佩戴安全工牌吗？",
            "访客需要在前台登记并全程陪同吗？",
            "安全事件必须在几小时内报告安全团队？",
            "可疑邮件通过什么按钮报告？",
            "点击演练钓鱼链接的员工需要参加什么培训？",
        ],
        "travel": [
            "出差住宿费每晚最多报销多少？",
            "出差机票一律预订什么舱位？",
            "出差机票需要提前几天预订？",
            "出差申请需要在预订前由谁审批？",
            "出国出差需要在出发前多少天获得部门负责人审批？",
            "出差酒店通过什么平台预订？",
        ],
    },
}

QUESTIONS: tuple[Question, ...] = tuple(
    Question(text, lang, topic) for lang, table in _QUESTIONS.items() for topic, qs in table.items() for text in qs
)


_SENTENCE_RE = re.compile(r"[^.!?。！？]+[.!?。！？]?")


def chunk_sections(documents: tuple[Document, ...] = DOCUMENTS, size: int = 3) -> tuple[Chunk, ...]:
    """Sliding-window chunking, ``size`` sentences with an overlap of ``size - 1``, per (topic, language).

    The usual production chunking, and the reason a healthy retriever returns *three* relevant chunks: every
    sentence lives in ``size`` overlapping windows (ragged at the section edges), so the top 3 for a question
    are the windows around the sentence that answers it — which is what Context Precision@3 expects.
    """
    sections: dict[tuple[str, str], list[str]] = {}
    for doc in documents:
        sents = [s.strip() for s in _SENTENCE_RE.findall(doc.text) if s.strip()]
        sections.setdefault((doc.topic, doc.lang), []).extend(sents)
    out = []
    for (topic, lang), sents in sections.items():
        joiner = "" if lang == "zh" else " "
        for start in range(-(size - 1), len(sents)):
            window = sents[max(0, start) : start + size]
            out.append(Chunk(f"{topic}-{lang}-{start + size - 1:02d}", lang, topic, joiner.join(window)))
    return tuple(out)


CHUNKS: tuple[Chunk, ...] = chunk_sections()
