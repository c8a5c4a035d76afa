#include "dialogs/decisiondialog.h"

#include "operator/operations.h"

#include <QDialogButtonBox>
#include <QFormLayout>
#include <QHBoxLayout>
#include <QLabel>
#include <QLineEdit>
#include <QPushButton>
#include <QStyle>
#include <QVBoxLayout>

namespace once::ui {

QLineEdit *newReasonEdit(QWidget *parent)
{
    auto *edit = new QLineEdit(parent);
    edit->setObjectName(QStringLiteral("reason"));
    edit->setMaxLength(MaxReasonLength);
    edit->setClearButtonEnabled(true);
    edit->setPlaceholderText(QObject::tr("Optional: why, e.g. “partner outage INC-4711 is over”"));
    edit->setToolTip(QObject::tr("Kept in the audit log and in the history of every event this touches"));
    return edit;
}

DecisionDialog::DecisionDialog(const QString &title, const QString &text, const QString &informativeText,
                               const QString &confirmText, QWidget *parent)
    : QDialog(parent)
{
    setWindowTitle(title);
    setWindowModality(Qt::WindowModal);

    auto *icon = new QLabel;
    const int size = style()->pixelMetric(QStyle::PM_MessageBoxIconSize, nullptr, this);
    icon->setPixmap(style()->standardIcon(QStyle::SP_MessageBoxWarning, nullptr, this).pixmap(size, size));
    icon->setAlignment(Qt::AlignTop);

    m_text = new QLabel(text);
    m_text->setObjectName(QStringLiteral("text"));
    m_text->setWordWrap(true);
    QFont bold = m_text->font();
    bold.setBold(true);
    bold.setPointSizeF(bold.pointSizeF() * 1.1);
    m_text->setFont(bold);
    m_informative = new QLabel(informativeText);
    m_informative->setObjectName(QStringLiteral("informativeText"));
    m_informative->setWordWrap(true);
    m_informative->setTextFormat(Qt::RichText);
    m_informative->setTextInteractionFlags(Qt::TextSelectableByMouse);

    m_reason = newReasonEdit();
    auto *reasonForm = new QFormLayout;
    reasonForm->addRow(tr("&Reason:"), m_reason);

    auto *buttons = new QDialogButtonBox;
    m_cancel = buttons->addButton(QDialogButtonBox::Cancel);
    // Destructive, not Accept: the button box makes its first Accept button the default
    // when none is. A decision that cannot be undone is never what Enter does by accident,
    // and Enter after typing a reason does not throw the reason away either: no default.
    m_confirm = buttons->addButton(confirmText, QDialogButtonBox::DestructiveRole);
    m_confirm->setObjectName(QStringLiteral("confirm"));
    m_confirm->setAutoDefault(false);
    m_cancel->setAutoDefault(false);
    connect(m_confirm, &QPushButton::clicked, this, &QDialog::accept);
    connect(buttons, &QDialogButtonBox::rejected, this, &QDialog::reject);

    auto *words = new QVBoxLayout;
    words->addWidget(m_text);
    words->addWidget(m_informative);
    words->addSpacing(6);
    words->addLayout(reasonForm);
    auto *top = new QHBoxLayout;
    top->addWidget(icon, 0, Qt::AlignTop);
    top->addSpacing(8);
    top->addLayout(words, 1);
    auto *layout = new QVBoxLayout(this);
    layout->addLayout(top);
    layout->addWidget(buttons);
    setMinimumWidth(520);
    m_cancel->setFocus();
}

DecisionDialog::~DecisionDialog() = default;

QString DecisionDialog::text() const
{
    return m_text->text();
}

QString DecisionDialog::informativeText() const
{
    return m_informative->text();
}

QString DecisionDialog::reason() const
{
    return m_reason->text().trimmed();
}

} // namespace once::ui
