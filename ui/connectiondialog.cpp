#include "connectiondialog.h"

#include <QDialogButtonBox>
#include <QFormLayout>
#include <QLabel>
#include <QPushButton>
#include <QVBoxLayout>

namespace once::ui {

ConnectionDialog::ConnectionDialog(QWidget *parent) : QDialog(parent)
{
    m_preview = new QLabel;
    m_preview->setObjectName(QStringLiteral("preview"));
    m_preview->setWordWrap(true);
    m_preview->setTextInteractionFlags(Qt::TextSelectableByMouse);
    m_buttons = new QDialogButtonBox(QDialogButtonBox::Open | QDialogButtonBox::Cancel);
    connect(m_buttons, &QDialogButtonBox::accepted, this, &QDialog::accept);
    connect(m_buttons, &QDialogButtonBox::rejected, this, &QDialog::reject);
}

void ConnectionDialog::layOut(QFormLayout *form, const QString &previewLabel, const QString &passwordNote,
                              int minimumWidth)
{
    form->addRow(previewLabel, m_preview);
    auto *note = new QLabel(passwordNote);
    note->setObjectName(QStringLiteral("passwordNote"));
    note->setWordWrap(true);
    note->setForegroundRole(QPalette::PlaceholderText);

    auto *layout = new QVBoxLayout(this);
    layout->addLayout(form);
    layout->addWidget(note);
    layout->addWidget(m_buttons);
    setMinimumWidth(minimumWidth);
}

void ConnectionDialog::setPreview(const QString &text, bool openable)
{
    m_buttons->button(QDialogButtonBox::Open)->setEnabled(openable);
    m_preview->setText(text);
}

} // namespace once::ui
