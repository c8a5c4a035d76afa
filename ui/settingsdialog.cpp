#include "settingsdialog.h"

#include "settings.h"

#include <QDialogButtonBox>
#include <QFormLayout>
#include <QSpinBox>

namespace once::ui {

SettingsDialog::SettingsDialog(QWidget *parent) : QDialog(parent)
{
    setWindowTitle(tr("Settings"));
    Settings settings;
    m_oldestAge = new QSpinBox;
    m_oldestAge->setRange(5, 7 * 24 * 3600);
    m_oldestAge->setSuffix(tr(" s"));
    m_oldestAge->setValue(settings.oldestAgeAlertSeconds());
    m_partnerFailingSends = new QSpinBox;
    m_partnerFailingSends->setObjectName(QStringLiteral("partnerFailingSends"));
    m_partnerFailingSends->setRange(2, 100);
    m_partnerFailingSends->setValue(settings.partnerFailingAlertSends());
    m_idempotencyWindow = new QSpinBox;
    m_idempotencyWindow->setRange(1, 24 * 90);
    m_idempotencyWindow->setSuffix(tr(" h"));
    m_idempotencyWindow->setValue(settings.idempotencyWindowHours());
    m_redriveRate = new QSpinBox;
    m_redriveRate->setRange(1, 100000);
    m_redriveRate->setSuffix(tr(" /s"));
    m_redriveRate->setValue(settings.redriveRate());

    auto *form = new QFormLayout;
    form->addRow(tr("Alert when the oldest ready message is older than"), m_oldestAge);
    m_partnerFailingSends->setToolTip(tr("The Overview raises \"the partner keeps failing\" when the partner has failed "
                                  "at least this many sends, of any events, in the last 5 minutes and applied "
                                  "none."));
    form->addRow(tr("Alert when the partner failed this many sends in 5 minutes, none applied"), m_partnerFailingSends);
    form->addRow(tr("Partner keeps idempotency keys for"), m_idempotencyWindow);
    form->addRow(tr("Default redrive rate"), m_redriveRate);
    auto *buttons = new QDialogButtonBox(QDialogButtonBox::Ok | QDialogButtonBox::Cancel);
    connect(buttons, &QDialogButtonBox::accepted, this, &QDialog::accept);
    connect(buttons, &QDialogButtonBox::rejected, this, &QDialog::reject);
    auto *layout = new QVBoxLayout(this);
    layout->addLayout(form);
    layout->addWidget(buttons);
}

void SettingsDialog::accept()
{
    Settings settings;
    settings.setOldestAgeAlertSeconds(m_oldestAge->value());
    settings.setPartnerFailingAlertSends(m_partnerFailingSends->value());
    settings.setIdempotencyWindowHours(m_idempotencyWindow->value());
    settings.setRedriveRate(m_redriveRate->value());
    QDialog::accept();
}

} // namespace once::ui
